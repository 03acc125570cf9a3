package remote

import "log/slog"

// BackendLogger is a backend's logger: logger (nil discards) with the
// backend's name on every record.
func BackendLogger(logger *slog.Logger, name string) *slog.Logger {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return logger.With("backend", name)
}
