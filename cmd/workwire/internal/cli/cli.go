// Package cli runs workwire's subcommands in the conventions of the go
// command and kubectl: `workwire help [command]`, `workwire <command> -h`,
// flags before or among arguments, results on stdout and logs on stderr,
// exit status 0 on success, 1 on failure and 2 on a bad command line or
// config file, said before anything runs.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
)

// Command is one subcommand, or a group of them (Subcommands).
type Command struct {
	// Name is the word that selects it: "broker", "check".
	Name string
	// Usage is its command line after the program's and the command's
	// name: "--config FILE [flags]".
	Usage string
	// Short is one line for the list of commands; Long, the text -h and
	// help show above the flags.
	Short, Long string
	// Flags registers the command's flags on fs and returns what runs it
	// with the arguments left after them. Nil for a group.
	Flags func(fs *flag.FlagSet) func(ctx context.Context, env *Env, args []string) error
	// Subcommands of a group such as "config".
	Subcommands []*Command
}

// Env is what a command reads and writes: its input, results and logs.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// UsageError is a command line or a config file a command cannot run
// with: exit status 2.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usagef is a UsageError with a formatted message.
func Usagef(format string, args ...any) error { return UsageError{fmt.Errorf(format, args...)} }

// Main runs the command args name (args excludes the program's name) and
// returns the exit status.
func Main(ctx context.Context, program string, commands []*Command, env *Env, args []string) int {
	root := &Command{Name: program, Subcommands: commands}
	return run(ctx, program, root, env, args)
}

func run(ctx context.Context, path string, group *Command, env *Env, args []string) int {
	if len(args) == 0 {
		group.printCommands(env.Stderr, path)
		return 2
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		return help(path, group, env, rest)
	}
	cmd := group.find(name)
	if cmd == nil {
		fmt.Fprintf(env.Stderr, "%s %s: unknown command\nRun '%s help' for usage.\n", path, name, path)
		return 2
	}
	if cmd.Flags == nil {
		return run(ctx, path+" "+cmd.Name, cmd, env, rest)
	}
	fs := flag.NewFlagSet(path+" "+cmd.Name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	runCmd := cmd.Flags(fs)
	fs.Usage = func() { cmd.printUsage(env.Stderr, path, fs) }
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2 // the flag package said what is wrong, and the usage
	}
	err := runCmd(ctx, env, fs.Args())
	var usage UsageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &usage):
		fmt.Fprintf(env.Stderr, "%s %s: %v\n", path, cmd.Name, err)
		return 2
	default:
		fmt.Fprintf(env.Stderr, "%s %s: %v\n", path, cmd.Name, err)
		return 1
	}
}

func help(path string, group *Command, env *Env, args []string) int {
	for len(args) > 0 {
		cmd := group.find(args[0])
		if cmd == nil {
			fmt.Fprintf(env.Stderr, "%s help %s: unknown command\nRun '%s help' for usage.\n", path, args[0], path)
			return 2
		}
		if cmd.Flags != nil {
			fs := flag.NewFlagSet(path+" "+cmd.Name, flag.ContinueOnError)
			cmd.Flags(fs)
			cmd.printUsage(env.Stdout, path, fs)
			return 0
		}
		path, group, args = path+" "+cmd.Name, cmd, args[1:]
	}
	group.printCommands(env.Stdout, path)
	return 0
}

func (c *Command) find(name string) *Command {
	i := slices.IndexFunc(c.Subcommands, func(s *Command) bool { return s.Name == name })
	if i < 0 {
		return nil
	}
	return c.Subcommands[i]
}

func (c *Command) printCommands(w io.Writer, path string) {
	if c.Long != "" {
		fmt.Fprintf(w, "%s\n\n", strings.TrimSpace(c.Long))
	}
	fmt.Fprintf(w, "Usage:\n\n\t%s <command> [arguments]\n\nThe commands are:\n\n", path)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, s := range c.Subcommands {
		fmt.Fprintf(tw, "\t%s\t%s\n", s.Name, s.Short)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nUse \"%s help <command>\" for more information about a command.\n", path)
}

func (c *Command) printUsage(w io.Writer, path string, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: %s %s %s\n\n", path, c.Name, c.Usage)
	if c.Long != "" {
		fmt.Fprintf(w, "%s\n\n", strings.TrimSpace(c.Long))
	}
	fs.SetOutput(w)
	fmt.Fprintln(w, "Flags:")
	fs.PrintDefaults()
}

// Stdio is the process's own Env.
func Stdio() *Env { return &Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr} }

// Runner is a command that takes flags and no arguments.
type Runner interface {
	Register(fs *flag.FlagSet)
	Run(ctx context.Context, env *Env) error
}

// FlagsOnly is the Command.Flags of a command that a new Runner runs: its
// flags registered, and arguments refused.
func FlagsOnly[R Runner](newRunner func() R) func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	return func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
		r := newRunner()
		r.Register(fs)
		return func(ctx context.Context, env *Env, args []string) error {
			if err := NoArgs(args); err != nil {
				return err
			}
			return r.Run(ctx, env)
		}
	}
}
