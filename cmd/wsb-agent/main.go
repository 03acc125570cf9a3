package main

import (
	"os"

	"github.com/wsbroker/wsbroker/remote/agent"
)

func main() {
	os.Exit(agent.Main(os.Args[1:]))
}
