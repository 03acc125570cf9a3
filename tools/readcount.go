package tools

import (
	"errors"
	"io"
)

// countBudget bounds the bytes a read scans only to count lines, past
// the last line its result shows: a read of a 50 GB file answers after
// this much instead of scanning it all. Past it the total is a lower
// bound, and the notice says so.
var countBudget int64 = 256 << 20

// countLimiter passes reads through until counting starts (start), then
// stops with io.EOF once countBudget bytes more were read, noting in cut
// that the file went on.
type countLimiter struct {
	r        io.Reader
	counting bool
	left     int64
	cut      bool
}

func newCountLimiter(r io.Reader) *countLimiter { return &countLimiter{r: r, left: countBudget} }

// start begins the budget: from now on lines are only counted.
func (c *countLimiter) start() { c.counting = true }

func (c *countLimiter) Read(p []byte) (int, error) {
	if !c.counting || len(p) == 0 {
		return c.r.Read(p)
	}
	if c.left <= 0 {
		// Spent: is there more? One byte tells.
		var one [1]byte
		n, err := c.r.Read(one[:])
		if n > 0 {
			c.cut = true
			return 0, io.EOF
		}
		if err == nil {
			err = io.ErrNoProgress
		}
		if errors.Is(err, io.EOF) {
			return 0, io.EOF
		}
		return 0, err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}
