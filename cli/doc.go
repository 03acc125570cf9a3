// Package cli is the `broker` command line: the server and the client
// subcommands, built so that cmd/broker only hands it the process's
// arguments, streams and environment.
//
// # Overview
//
//	broker serve [flags]                     run the broker
//	broker ws create [--backend local]       create a workspace, print its id
//	broker ws create --profile NAME          the same, from a profile of the broker's config
//	broker ws ls                             list workspaces
//	broker ws rm <id>...                     delete workspaces
//	broker ws env <id> [--env K=V]...        replace a workspace's environment
//	broker tool <ws> <name> '<json args>'    run one tool, print its text
//	broker exec <ws> -- <command...>         run a command, stream its output
//	broker policy check <file>               validate a policy file, explain each rule
//	broker audit verify <file...>            check an audit trail's hash chain
//	broker token new | hash [token]          make a token, or the hash a tenant holds
//	broker version                           print build information
//
// Every command and subcommand answers -h and --help with its usage on
// stdout and exit status 0: a group (ws, policy, audit, token) lists its
// subcommands, every other verb parses its own flag.FlagSet, which lists
// its flags.
//
// # Configuration
//
// serve reads, from weakest to strongest: its defaults, an optional YAML
// file (--config or BROKER_CONFIG), environment variables (BROKER_LISTEN,
// BROKER_STATE_DIR, BROKER_TOKEN_FILE, BROKER_LOG_LEVEL, ...) and flags.
// With nothing set it serves the local backend on 127.0.0.1:8722, keeps
// its state in $XDG_STATE_HOME/wsbroker (~/.local/state/wsbroker), and on
// its first start that binds its address writes a random token to
// <state>/token (mode 0600) and prints it once to stderr. Once listening
// it prints the next step (the URL, where the token is, the default
// backend, a `broker ws create` and a curl command that reach it). Logs
// are JSON lines (log/slog) on stderr.
//
// A config file holds any of these keys (unknown keys are errors):
//
//	listen: 127.0.0.1:8722
//	stateDir: /var/lib/wsbroker
//	tokenFile: /etc/wsbroker/token   # default <stateDir>/token
//	identity: wsb-3f9a0c12d4e5       # default a random one kept in <stateDir>/identity
//	logLevel: info                   # debug, info, warn, error
//	defaultBackend: docker           # of a create naming none; default docker when served, else local
//	shutdownGrace: 10s
//	maxUploadBytes: 268435456
//	maxArchiveBytes: 1073741824       # file content of one tar in or out (broker cp)
//	local:                           # the local backend (package local's Config)
//	  killGrace: 2s
//	  shell: /bin/bash
//	  cgroups: auto                  # auto, v1, v2, or off (process groups only)
//	  limits: {memoryBytes: 2147483648, pids: 1024, cpu: 2}  # per workspace; need cgroups
//	  # diskBytes: 1073741824      # each workspace a filesystem of this size (default where root
//	                               # with loop devices; -1 none)
//	ssh:                             # the ssh backend, only when present (package ssh's Config)
//	  knownHostsFiles: [/etc/wsbroker/known_hosts]
//	  identityFiles: [/etc/wsbroker/id_ed25519]
//	  agent: false                   # also the keys of the ssh-agent at $SSH_AUTH_SOCK
//	  insecureIgnoreHostKey: false   # never outside a throwaway lab
//	  hosts:
//	    vm-01: {address: "10.0.3.11:22", user: agent}
//	docker:                          # the docker backend, only when present (package docker's Config); {} for all defaults
//	  host: unix:///var/run/docker.sock
//	  defaultImage: wsbroker/workspace:current
//	  memory: 2GiB
//	  network: none
//	  idleTTL: 24h
//	http:                            # limits against hostile clients (docs/security.md)
//	  allowedHosts: [localhost, 127.0.0.1, "::1", broker.internal]  # Host names answered; others 421
//	  maxBodyBytesInFlight: 33554432 # request-body bytes held at once; past it 503
//	  bodyIdleTimeout: 30s           # a body that stalls this long ends
//	  minBodyRate: 4096              # bytes/s a body must keep up after bodyIdleTimeout
//	  maxConns: 4096                 # open connections; default also at most half the fd limit
//	  maxConnsPerPeer: 512           # open connections per client IP
//
// The local backend is always served. The ssh backend is served when the
// file has an ssh section or a --ssh-* flag is given: --ssh-known-hosts
// and --ssh-identity (repeatable, replacing the file's lists), --ssh-host
// name=user@host[:port] (repeatable, added to the file's hosts),
// --ssh-agent and --ssh-insecure-ignore-host-key. Its configuration is
// checked at start: no known_hosts file (unless insecure), no key, or an
// unreadable file stops serve with an error.
//
// The docker backend is served when the file has a docker section or
// --docker or --docker-host is given (--docker=false turns the file's
// section off). serve then connects to the engine at start and stops with
// an error when it does not answer; without either, no engine is needed.
// Served, docker is the backend of a create that names none, unless
// defaultBackend (BROKER_DEFAULT_BACKEND, --default-backend) names another
// served one; serve says which at start.
// The injected SFTP server, wsb-agent (make build puts it in bin/
// beside the broker), is looked for beside the broker's executable, then
// on PATH.
//
// A tenants section (docs/tenancy.md) replaces the token file: each
// tenant has token hashes, quotas, backends, images and a policy file
// (docs/policy.md). serve reloads the tenants on SIGHUP and when the
// config, token or a policy file changes; a file that does not load is
// logged and the tenants in force stay. The audit section (default
// <stateDir>/audit/audit.jsonl, rotated at 100 MiB, 10 rotated files or
// 1 GiB kept, calls refused under 1 MiB free but DELETEs, 4 MiB kept
// allocated for records on a full disk; requests that fail
// authentication kept apart in audit-unauthenticated.jsonl beside it)
// and the tls section
// (certFile, keyFile, clientCAFile for mTLS) are read at start.
//
// SIGINT or SIGTERM stops serve gracefully: it stops accepting, kills
// running commands, and gives other requests shutdownGrace to finish.
//
// The client subcommands find the broker through BROKER_URL (default
// http://127.0.0.1:8722) and authenticate with BROKER_TOKEN, or else with
// the token file serve wrote (BROKER_TOKEN_FILE, or <state>/token). When
// nothing listens there they name the URL and say to start `broker
// serve`. exec -t needs a terminal on stdin; without one (a pipe, a
// script) it runs the command without a terminal and says so.
//
// # Exit status
//
// 0 on success, 1 on failure (or a tool result with isError), 2 on a usage
// error; exec exits with the remote command's own exit status, and 130
// when interrupted.
package cli
