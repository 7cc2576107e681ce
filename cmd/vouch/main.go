// Command vouch builds ONNX models into deterministic engine plans, serves
// them with a tamper-evident audit log, and replays past requests bit for
// bit. Run `vouch help` for the commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/vouchml/vouch/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.NewMain(os.Stdout, os.Stderr).Run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
