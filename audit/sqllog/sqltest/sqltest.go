// Package sqltest starts a private MariaDB server for tests: Debian's
// mariadb-server, run from a fresh data directory in a temporary folder,
// listening on a Unix socket only, stopped when the test ends.
package sqltest

import (
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // registers "mysql"
)

// Start returns the DSN of database "vouch" on a new MariaDB server. Without
// MariaDB installed the test is skipped, unless VOUCH_CI=1, where it fails.
func Start(t testing.TB) string {
	t.Helper()
	server, err1 := exec.LookPath("mariadbd")
	if err1 != nil {
		server, err1 = exec.LookPath("/usr/sbin/mariadbd")
	}
	install, err2 := exec.LookPath("mariadb-install-db")
	if err1 != nil || err2 != nil {
		if os.Getenv("VOUCH_CI") == "1" {
			t.Fatalf("sqltest: MariaDB is not installed (apt-get install mariadb-server): %v %v", err1, err2)
		}
		t.Skip("sqltest: MariaDB is not installed (apt-get install mariadb-server)")
	}
	dir, err := os.MkdirTemp("", "vouch-mariadb")
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	sock := filepath.Join(dir, "sock")
	args := []string{"--no-defaults", "--datadir=" + data, "--auth-root-authentication-method=normal", "--skip-test-db"}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	if out, err := exec.Command(install, args...).CombinedOutput(); err != nil {
		t.Fatalf("sqltest: mariadb-install-db: %v\n%s", err, out)
	}
	sargs := []string{"--no-defaults", "--datadir=" + data, "--socket=" + sock, "--skip-networking",
		"--pid-file=" + filepath.Join(dir, "pid"), "--innodb-buffer-pool-size=128M", "--max-connections=500",
		"--log-error=" + filepath.Join(dir, "error.log")}
	if os.Geteuid() == 0 {
		sargs = append(sargs, "--user=root")
	}
	cmd := exec.Command(server, sargs...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("sqltest: mariadbd: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		os.RemoveAll(dir)
	})
	root := "root@unix(" + sock + ")/"
	deadline := time.Now().Add(60 * time.Second)
	for {
		db, err := sql.Open("mysql", root)
		if err == nil {
			err = db.Ping()
			if err == nil {
				_, err = db.Exec("CREATE DATABASE IF NOT EXISTS vouch")
			}
			db.Close()
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("sqltest: MariaDB did not start: %v\n%s", err, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Sprintf("%svouch", root)
}
