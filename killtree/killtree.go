package killtree

import "time"

// pollInterval is how often a kill checks whether its targets are gone.
const pollInterval = 10 * time.Millisecond

// DefaultGrace is the time between SIGTERM and SIGKILL that callers use
// when they have no better value.
const DefaultGrace = 2 * time.Second
