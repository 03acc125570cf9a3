//go:build !unix

package broker

func defaultMaxConns() int { return DefaultMaxConns }
