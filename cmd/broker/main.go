package main

import (
	"context"
	"os"

	"github.com/wsbroker/wsbroker/cli"
)

func main() {
	os.Exit(cli.New().Run(context.Background(), os.Args[1:]))
}
