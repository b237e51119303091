package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"qubiq.dev/edge/client"
)

// Shell completion (docs/qubiqctl.md, "Shell completion"): `qubiqctl
// completion bash|zsh` prints a script that asks `qubiqctl __complete LINE`
// for the candidates of the word under the cursor. Commands, subcommands,
// flags and flag values come from the command table; tag paths and device
// names from the running daemon (--url and --api-key of the line, else
// QUBIQ_URL and QUBIQ_API_KEY), with a short timeout and silently nothing
// when it does not answer.

// completeTimeout bounds the daemon calls of one completion.
const completeTimeout = 2 * time.Second

func init() {
	commands["completion"] = command{name: "completion", args: "bash|zsh", local: true,
		help: "Print the shell completion script: source <(qubiqctl completion bash) in ~/.bashrc, or source <(qubiqctl completion zsh) in ~/.zshrc (after compinit).",
		long: "Completes commands, subcommands, flags and their values, and asks the daemon (--url/--api-key of the " +
			"line, else QUBIQ_URL/QUBIQ_API_KEY) for tag paths and device names.",
		run: cmdCompletion}
	commands["help"] = command{name: "help", args: "[COMMAND...]", local: true,
		help: "Show every command, or one command's usage, flags and details (the same as COMMAND --help).",
		run:  func(context.Context, *cli, *opts, []string) error { return nil }}
	commands["__complete"] = command{name: "__complete", args: "LINE", local: true, hidden: true,
		help: "Print the completion candidates of the last word of LINE (used by the completion scripts).",
		run:  cmdComplete}
}

func cmdCompletion(_ context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 1, 1, "bash or zsh"); err != nil {
		return err
	}
	switch args[0] {
	case "bash":
		_, err := io.WriteString(c.stdout, bashCompletion)
		return err
	case "zsh":
		_, err := io.WriteString(c.stdout, zshCompletion)
		return err
	}
	return usagef("completion: %q: want bash or zsh", args[0])
}

const bashCompletion = `# bash completion for qubiqctl. Load it with:
#   source <(qubiqctl completion bash)
_qubiqctl() {
    local line="${COMP_LINE:0:COMP_POINT}"
    local cur="${COMP_WORDS[COMP_CWORD]}"
    local word="${line##*[[:space:]]}"
    local strip="${word%"$cur"}"
    local IFS=$'\n' c
    COMPREPLY=()
    for c in $("${COMP_WORDS[0]}" __complete "$line" 2>/dev/null); do
        COMPREPLY+=("${c#"$strip"}")
    done
    if [[ ${#COMPREPLY[@]} -eq 1 && ${COMPREPLY[0]} == */ ]]; then
        compopt -o nospace 2>/dev/null
    fi
}
complete -o default -F _qubiqctl qubiqctl
`

const zshCompletion = `#compdef qubiqctl
# zsh completion for qubiqctl. Load it (after compinit) with:
#   source <(qubiqctl completion zsh)
_qubiqctl() {
    local line="${(j: :)words[1,CURRENT]}"
    local -a cands
    cands=("${(@f)$(${words[1]} __complete "$line" 2>/dev/null)}")
    cands=(${cands:#})
    if (( ${#cands} == 0 )); then
        _files
        return
    fi
    compadd -S '' -- ${(M)cands:#*/}
    compadd -- ${cands:#*/}
}
compdef _qubiqctl qubiqctl
`

func cmdComplete(ctx context.Context, c *cli, _ *opts, args []string) error {
	if len(args) != 1 {
		return nil
	}
	for _, s := range complete(ctx, c, args[0]) {
		fmt.Fprintln(c.stdout, s)
	}
	return nil
}

// valueFlags are the global flags that take a value.
var valueFlags = func() map[string]bool {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	var g globals
	g.register(fs)
	out := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) {
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !b.IsBoolFlag() {
			out[f.Name] = true
		}
	})
	return out
}()

// flagValues are the values some flags take, for completion.
var flagValues = map[string][]string{
	"format":      {"csv", "yaml"},
	"realm":       {"operator", "platform"},
	"level":       {"view", "operate", "supervise"},
	"write-level": {"view", "operate", "supervise", "design"},
	"scopes": {"tag:read", "tag:write", "db:read", "db:write", "hist:read", "hist:write", "vars:read", "vars:write",
		"file:read", "file:write", "script:execute"},
	"permissions": {"designer", "sandbox_admin", "users_admin", "firmware"},
}

// complete returns the candidates for the last word of line (a command
// line up to the cursor: the program name, then words; a trailing space
// means a new, empty word).
func complete(ctx context.Context, c *cli, line string) []string {
	ws := splitWords(line)
	if len(ws) == 0 {
		return nil
	}
	ws = ws[1:] // the program name
	cur := ""
	if !strings.HasSuffix(line, " ") && len(ws) > 0 {
		cur, ws = ws[len(ws)-1], ws[:len(ws)-1]
	}
	g := globals{url: envOr("QUBIQ_URL", defaultURL), apiKey: os.Getenv("QUBIQ_API_KEY"), timeout: completeTimeout,
		tlsPin: os.Getenv("QUBIQ_TLS_FINGERPRINT")}

	// The command and its positional arguments so far; flags (and the
	// values of those that take one) skipped, the global ones read.
	var pos []string
	var cmd *command
	var cmdFlags map[string]*flag.Flag
	takesValue := func(name string) bool {
		if valueFlags[name] {
			return true
		}
		if f, ok := cmdFlags[name]; ok {
			b, isBool := f.Value.(interface{ IsBoolFlag() bool })
			return !isBool || !b.IsBoolFlag()
		}
		return false
	}
	prevFlag := ""
	for i := 0; i < len(ws); i++ {
		w := ws[i]
		if strings.HasPrefix(w, "-") && w != "-" {
			name, val, hasVal := strings.Cut(strings.TrimLeft(w, "-"), "=")
			if takesValue(name) && !hasVal {
				if i+1 < len(ws) {
					val = ws[i+1]
					i++
				} else {
					prevFlag = name
				}
			}
			switch name {
			case "url":
				g.url = val
			case "api-key":
				g.apiKey = val
			case "tls-fingerprint":
				g.tlsPin = val
			}
			continue
		}
		pos = append(pos, w)
		if cmd == nil {
			if k, ok := commands[strings.Join(pos, " ")]; ok {
				cmd, pos = &k, nil
				cmdFlags = map[string]*flag.Flag{}
				for _, f := range commandFlags(k) {
					cmdFlags[f.Name] = f
				}
			}
		}
	}
	if prevFlag != "" {
		return flagValueCandidates(prevFlag, cur)
	}
	if strings.HasPrefix(cur, "-") {
		if name, val, ok := strings.Cut(strings.TrimLeft(cur, "-"), "="); ok {
			var out []string
			for _, v := range flagValueCandidates(name, val) {
				out = append(out, "--"+name+"="+v)
			}
			return out
		}
		names := slices.Sorted(maps.Keys(globalFlagNames))
		if cmd != nil {
			for n := range cmdFlags {
				names = append(names, n)
			}
		}
		var out []string
		for _, n := range names {
			dash := "--"
			if len(n) == 1 {
				dash = "-"
			}
			if strings.HasPrefix(dash+n, cur) {
				out = append(out, dash+n)
			}
		}
		sort.Strings(out)
		return out
	}
	switch {
	case cmd == nil:
		return prefixed(nextWords(strings.Join(pos, " ")), cur)
	case cmd.name == "help":
		return prefixed(nextWords(strings.Join(pos, " ")), cur)
	case cmd.name == "completion":
		if len(pos) == 0 {
			return prefixed([]string{"bash", "zsh"}, cur)
		}
		return nil
	case cmd.complete == nil:
		return nil
	}
	g.timeout = completeTimeout
	c.g = g
	cl, err := client.New(g.url, g.apiKey, c.httpClient())
	if err != nil {
		return nil
	}
	c.c = cl
	cctx, cancel := context.WithTimeout(ctx, completeTimeout)
	defer cancel()
	return cmd.complete(cctx, c, pos, cur)
}

// nextWords returns the words that may follow the command words typed so
// far: the top-level commands for "", the subcommands of a group.
func nextWords(typed string) []string {
	if typed == "" {
		var out []string
		for _, c := range sortedCommands("") {
			w := strings.Fields(c.name)[0]
			if !slices.Contains(out, w) {
				out = append(out, w)
			}
		}
		return out
	}
	return subcommands(typed)
}

// flagValueCandidates completes the value of flag name; for a list flag
// (scopes, permissions) the element after the last comma.
func flagValueCandidates(name, cur string) []string {
	vals, ok := flagValues[name]
	if !ok {
		return nil
	}
	if name == "scopes" || name == "permissions" {
		head := ""
		if i := strings.LastIndexByte(cur, ','); i >= 0 {
			head, cur = cur[:i+1], cur[i+1:]
		}
		var out []string
		for _, v := range prefixed(vals, cur) {
			if !slices.Contains(strings.Split(head, ","), v) {
				out = append(out, head+v)
			}
		}
		return out
	}
	return prefixed(vals, cur)
}

func prefixed(words []string, cur string) []string {
	var out []string
	for _, w := range words {
		if strings.HasPrefix(w, cur) {
			out = append(out, w)
		}
	}
	return out
}

// splitWords splits a command line into words with single and double
// quotes and backslash escapes, as a shell does (no expansion).
func splitWords(s string) []string {
	var out []string
	var w strings.Builder
	in := false
	var quote byte
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case quote != 0:
			if ch == quote {
				quote = 0
			} else if ch == '\\' && quote == '"' && i+1 < len(s) {
				i++
				w.WriteByte(s[i])
			} else {
				w.WriteByte(ch)
			}
		case ch == '\'' || ch == '"':
			quote, in = ch, true
		case ch == '\\' && i+1 < len(s):
			i++
			w.WriteByte(s[i])
			in = true
		case ch == ' ' || ch == '\t':
			if in {
				out = append(out, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteByte(ch)
			in = true
		}
	}
	if in {
		out = append(out, w.String())
	}
	return out
}
