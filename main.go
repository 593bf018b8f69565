// Command licensor is a license API in front of an upstream license vendor,
// built so that every create is safe to retry. Run it with no arguments to
// serve the API; see `licensor help` for the other commands.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/licensor-api/licensor/app/console"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := console.Run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "licensor:", err)
	}
	os.Exit(console.ExitCode(err))
}
