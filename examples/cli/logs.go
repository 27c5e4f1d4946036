package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/sqlitestore"
)

// logsOptions are the parsed command line of cli logs.
type logsOptions struct {
	db       string
	sessions nameList // none: every session
	n        int      // 0: every record
	verb     string   // "list", "show" or "delete"
	id       int64    // show's record
}

// timeLayout is how a record's start is shown, in local time.
const timeLayout = "2006-01-02 15:04:05"

func parseLogsFlags(args []string, stderr io.Writer) (logsOptions, error) {
	o := logsOptions{verb: "list"}
	fset := flag.NewFlagSet("cli logs", flag.ContinueOnError)
	fset.SetOutput(stderr)
	fset.Usage = func() {
		fmt.Fprintf(fset.Output(), `usage: cli logs -db FILE [-session ID] [-n N]   list the model calls, newest first
       cli logs -db FILE show ID                  show one: what was sent, what came back
       cli logs -db FILE delete [-session ID]     delete the records (of the sessions)

Reads the model calls a run with -db recorded in its file: one line each (id,
start, session, round, purpose, model, tokens in→out, time to the first
token, latency, status), or the whole record of one, its request as sent (the
API key is never in it) and the reply's text and tool calls. The file keeps
the last %s calls of the past week. Flags may come before or after the
command.

flags:
`, thousands(apiLogRows))
		fset.PrintDefaults()
		fmt.Fprint(fset.Output(), `
exit status:
  0  done (no record to list is not an error)
  1  the file does not exist or cannot be read, or no record has the id
  2  bad flags
`)
	}
	fset.StringVar(&o.db, "db", "", "the SQLite `file` of a run with -db (required; never created here)")
	fset.Var(&o.sessions, "session", "only the calls of the conversation `id` (repeat for several)")
	fset.IntVar(&o.n, "n", 20, "list at most `N` calls, the newest (0: all)")

	// Flags may come before and after the command and its id: parse again
	// after each word, until "--" or the end.
	var words []string
	for {
		if err := fset.Parse(args); err != nil {
			return o, err
		}
		rest := fset.Args()
		if len(rest) == 0 {
			break
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			words = append(words, rest...)
			break
		}
		words = append(words, rest[0])
		args = rest[1:]
	}
	set := map[string]bool{}
	fset.Visit(func(f *flag.Flag) { set[f.Name] = true })

	switch {
	case o.db == "":
		return o, usageError{"logs: -db is required: the SQLite file a run with -db recorded its calls in"}
	case o.n < 0:
		return o, usageError{"logs: -n must not be negative"}
	}
	if len(words) > 0 {
		o.verb = words[0]
	}
	switch o.verb {
	case "list":
		if len(words) > 1 {
			return o, usageError{fmt.Sprintf("logs: unexpected %q after list", words[1])}
		}
	case "show":
		if len(words) != 2 {
			return o, usageError{"logs: show takes one record id (cli logs -db FILE show ID)"}
		}
		id, err := strconv.ParseInt(words[1], 10, 64)
		if err != nil || id < 1 {
			return o, usageError{fmt.Sprintf("logs: show: %q is not a record id (a number that cli logs lists)", words[1])}
		}
		if set["n"] || set["session"] {
			return o, usageError{"logs: show takes no -n or -session: the id names the record"}
		}
		o.id = id
	case "delete":
		if len(words) > 1 {
			return o, usageError{fmt.Sprintf("logs: unexpected %q after delete", words[1])}
		}
		if set["n"] {
			return o, usageError{"logs: delete takes no -n: it deletes every record of the -session given, or all of them"}
		}
	default:
		return o, usageError{fmt.Sprintf("logs: unknown command %q (list, show ID or delete)", o.verb)}
	}
	return o, nil
}

// runLogs is cli logs; it returns the exit status.
func runLogs(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseLogsFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "cli: %s\n", ue.msg)
		return exitUsage
	}
	if err != nil {
		return exitUsage // the flag package has already said what is wrong
	}
	if err := o.run(ctx, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "cli: logs: %s\n", oneLine(err.Error(), 500))
		return exitError
	}
	return exitOK
}

func (o logsOptions) run(ctx context.Context, stdout, stderr io.Writer) error {
	// sqlitestore.Open creates a missing file: a mistyped name must not
	// leave an empty database behind, nor turn an empty file into one.
	fi, err := os.Stat(o.db)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: no such file (give the -db file of a run)", o.db)
	case err != nil:
		return err
	case fi.IsDir():
		return fmt.Errorf("%s is a folder, not the -db file of a run", o.db)
	case fi.Size() == 0:
		// SQLite takes an empty file for a new database, which Open would
		// make of it; a run's file holds its schema from the start.
		return fmt.Errorf("%s is empty, not the -db file of a run", o.db)
	}
	st, err := sqlitestore.Open(ctx, o.db)
	if err != nil {
		return err
	}
	defer st.Close()

	switch o.verb {
	case "show":
		c, err := st.APICall(ctx, o.id)
		if errors.Is(err, memory.ErrNotFound) {
			return fmt.Errorf("no record %d in %s (cli logs -db %s lists them)", o.id, o.db, o.db)
		}
		if err != nil {
			return err
		}
		return writeCall(stdout, c)
	case "delete":
		if err := st.DeleteAPICalls(ctx, memory.APICallQuery{SessionIDs: o.sessions}); err != nil {
			return err
		}
		if len(o.sessions) == 0 {
			fmt.Fprintf(stderr, "cli: logs: deleted every record of %s\n", o.db)
		} else {
			fmt.Fprintf(stderr, "cli: logs: deleted the records of session %s in %s\n", strings.Join(o.sessions, ", "), o.db)
		}
		return nil
	}
	calls, err := st.APICalls(ctx, memory.APICallQuery{SessionIDs: o.sessions, Limit: o.n})
	if err != nil {
		return err
	}
	if len(calls) == 0 {
		what := ""
		if len(o.sessions) > 0 {
			what = " for session " + strings.Join(o.sessions, ", ")
		}
		fmt.Fprintf(stderr, "cli: logs: no model call recorded in %s%s\n", o.db, what)
		return nil
	}
	return writeCalls(stdout, calls)
}

// writeCalls lists calls one a line, in columns under a header.
func writeCalls(w io.Writer, calls []memory.APICall) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTARTED\tSESSION\tROUND\tPURPOSE\tMODEL\tTOKENS\tFIRST\tTOTAL\tSTATUS")
	for _, c := range calls {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", c.ID, c.Started.Local().Format(timeLayout),
			orDash(oneLine(c.SessionID, 40)), c.Round, c.Purpose, oneLine(c.Model, 40), tokens(c.Usage),
			duration(c.FirstToken), duration(c.Latency), status(c, 120))
	}
	return tw.Flush()
}

// writeCall writes the whole record c: its metadata, the request as sent,
// indented, and the reply.
func writeCall(w io.Writer, c memory.APICall) error {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 1, ' ', 0)
	field := func(name, value string) { fmt.Fprintf(tw, "%s:\t%s\n", name, value) }
	field("id", strconv.FormatInt(c.ID, 10))
	field("started", c.Started.Local().Format(timeLayout+".000 -0700"))
	field("session", orDash(oneLine(c.SessionID, 200)))
	field("round", strconv.Itoa(c.Round))
	field("purpose", string(c.Purpose))
	field("model", oneLine(c.Model, 200))
	field("status", status(c, 2000))
	field("finish reason", orDash(oneLine(c.FinishReason, 200)))
	if c.Usage == (memory.APIUsage{}) {
		field("tokens", "not reported")
	} else {
		field("tokens", thousands(c.Usage.InputTokens)+" in, "+thousands(c.Usage.OutputTokens)+" out")
	}
	field("first token", duration(c.FirstToken))
	field("latency", duration(c.Latency))
	tw.Flush()

	b.WriteString("\nrequest:\n")
	switch {
	case len(c.Request) == 0:
		b.WriteString("  (not recorded: the run kept only the calls' metadata)\n")
	default:
		var ind bytes.Buffer
		if err := json.Indent(&ind, c.Request, "", "  "); err != nil {
			ind.Reset()
			ind.Write(c.Request) // shown as it is
		}
		b.WriteString(clean(ind.String()))
		b.WriteString("\n")
	}

	b.WriteString("\nreply:\n")
	switch {
	case c.Reply == nil:
		b.WriteString("  (not recorded: the run kept only the calls' metadata)\n")
	case c.Reply.Text == "" && len(c.Reply.ToolCalls) == 0:
		b.WriteString("  (nothing)\n")
	default:
		if t := clean(c.Reply.Text); t != "" {
			b.WriteString(t)
			if !strings.HasSuffix(t, "\n") {
				b.WriteString("\n")
			}
		}
		if len(c.Reply.ToolCalls) > 0 {
			b.WriteString("\ntool calls:\n")
			for _, tc := range c.Reply.ToolCalls {
				fmt.Fprintf(&b, "  %s (%s) %s\n", oneLine(tc.Name, 200), oneLine(tc.ID, 200), oneLine(tc.Arguments, 4000))
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
