package cli

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is vouch's release version.
const Version = "0.1.0-dev"

func runVersion(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("version", "version", "Prints vouch's version, VCS revision and Go version.")
	if _, err := parseInterleaved(fs, args); err != nil {
		return err
	}
	rev := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				rev = s.Value
			}
		}
	}
	fmt.Fprintf(m.Stdout, "vouch %s (revision %s, %s, %s/%s)\n", Version, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
