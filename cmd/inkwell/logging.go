package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

type logFlags struct {
	format *string
	level  *string
}

func addLogFlags(fs *flag.FlagSet) logFlags {
	return logFlags{
		format: fs.String("log-format", "text", "log format: text or json"),
		level:  fs.String("log-level", "info", "log level: debug, info, warn or error"),
	}
}

// logger builds the one *slog.Logger that main hands down.
func (f logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(*f.level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", *f.level)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(*f.format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", *f.format)
}
