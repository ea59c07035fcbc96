package cli

import (
	"encoding/json"
	"flag"
	"io"
	"log/slog"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// Output is the -o flag of commands that print results: text, one line
// each, or json.
type Output struct{ Format string }

// Register adds -o to fs.
func (o *Output) Register(fs *flag.FlagSet) {
	fs.StringVar(&o.Format, "o", "text", "output format: text or json")
}

// Check refuses a format that is neither.
func (o *Output) Check() error {
	if o.Format != "text" && o.Format != "json" {
		return Usagef("-o %q: want text or json", o.Format)
	}
	return nil
}

// JSON says whether results are printed as JSON.
func (o *Output) JSON() bool { return o.Format == "json" }

// PrintJSON writes v to w as indented JSON and a newline.
func PrintJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// Logging is the -v and -log-format flags of commands that log.
type Logging struct {
	V      int
	Format string
}

// Register adds -v and -log-format to fs.
func (l *Logging) Register(fs *flag.FlagSet) {
	fs.IntVar(&l.V, "v", 0, "log verbosity: 0 for what an operator needs (connections, failures), 2 for every connect attempt and resync, 4 for every event")
	fs.StringVar(&l.Format, "log-format", "text", "log format: text or json (one object a line)")
}

// Logger returns the logger the flags ask for, writing to w, and makes it
// klog's too, so client-go's logs go the same way.
func (l *Logging) Logger(w io.Writer) (logr.Logger, error) {
	if l.V < 0 {
		return logr.Logger{}, Usagef("-v %d: want 0 or more", l.V)
	}
	opts := &slog.HandlerOptions{Level: slog.Level(-l.V)}
	var h slog.Handler
	switch l.Format {
	case "text":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return logr.Logger{}, Usagef("-log-format %q: want text or json", l.Format)
	}
	log := logr.FromSlogHandler(h)
	klog.SetLogger(log)
	return log, nil
}

// Required is the error for a flag a command cannot run without.
func Required(flag string) error { return Usagef("-%s is required", flag) }

// NoArgs refuses arguments a command takes none of.
func NoArgs(args []string) error {
	if len(args) > 0 {
		return Usagef("unexpected arguments %q", args)
	}
	return nil
}
