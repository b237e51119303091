// Command qubiqd is the QUBIQ Edge daemon: it polls devices, keeps the tag
// store, serves the REST API and runs gateway scripts in sandboxed Python
// workers (README.md, Binaries).
//
//	qubiqd --config FILE       run (default /etc/qubiq/qubiq.yaml)
//	qubiqd --check-config      validate config and project, exit 0 or 1
//	qubiqd --version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"qubiq.dev/edge/config"
	"qubiq.dev/edge/daemon"
	_ "qubiq.dev/edge/device/all"
	"qubiq.dev/edge/gateway/appliance"
	"qubiq.dev/edge/sandbox"
	"qubiq.dev/edge/store"
	"qubiq.dev/edge/systemd"
)

func main() {
	// The sandbox re-executes this binary as its worker helper
	// ("qubiqd sandbox-exec ..."): that path never returns.
	sandbox.MaybeRunHelper()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("qubiqd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "/etc/qubiq/qubiq.yaml", "daemon configuration `file`")
	check := fs.Bool("check-config", false, "validate the configuration and project, then exit")
	version := fs.Bool("version", false, "print the version and exit")
	logLevel := fs.String("log-level", "", "log level: debug, info, warn, error (default: the config's log.level, else info)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: qubiqd [--config FILE] [--check-config] [--log-level LEVEL] [--version]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "qubiqd: unexpected argument %q (qubiqd takes only flags; qubiqd --help lists them)\n", fs.Arg(0))
		return 2
	}
	if *version {
		fmt.Fprintln(stdout, "qubiqd", daemon.Version)
		return 0
	}
	var lvl slog.Level
	if *logLevel != "" {
		l, err := systemd.ParseLevel(*logLevel)
		if err != nil {
			fmt.Fprintf(stderr, "qubiqd: --log-level: %v\n", err)
			return 2
		}
		lvl = l
	}
	if *check {
		log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
		if err := daemon.Check(*cfgPath, log); err != nil {
			fmt.Fprintln(stderr, "qubiqd: configuration invalid:")
			for _, l := range config.Problems(err) {
				fmt.Fprintln(stderr, l)
			}
			return 1
		}
		fmt.Fprintln(stdout, "configuration ok:", *cfgPath)
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runDaemon(ctx, *cfgPath, *logLevel != "", lvl, stderr); err != nil {
		var ec interface{ RestartExitCode() int }
		if errors.As(err, &ec) {
			fmt.Fprintf(stderr, "qubiqd: %v\n", err)
			return ec.RestartExitCode() // 75: systemd restarts the daemon (a bundle or a restore is staged)
		}
		for _, l := range config.Problems(err) { // every problem of a refused config or project, FILE:LINE: what
			fmt.Fprintf(stderr, "qubiqd: %s\n", l)
		}
		if errors.Is(err, store.ErrInUse) {
			fmt.Fprintln(stderr, "qubiqd: another qubiqd holds this data_dir; stop it first")
		}
		return 1
	}
	return 0
}

// runDaemon loads the config, makes the logger (the journal under
// systemd, else text on stderr, as log.output says; the level from
// --log-level when given, else log.level, changeable at run time) and runs
// the daemon.
func runDaemon(ctx context.Context, path string, levelGiven bool, lvl slog.Level, stderr io.Writer) error {
	cfg, err := config.LoadDaemon(path)
	if err != nil {
		return err
	}
	set, err := appliance.ParseSettings(cfg)
	if err != nil {
		return err
	}
	if !levelGiven {
		lvl = set.LogLevel
	}
	log, level, err := systemd.NewLogger(lvl, systemd.LogOptions{Output: set.LogOutput, Stderr: stderr, Identifier: "qubiqd"})
	if err != nil {
		return err
	}
	sys, err := daemon.New(ctx, cfg, log, level)
	if err != nil {
		return err
	}
	if err := sys.Run(ctx); err != nil {
		return err
	}
	log.Info("qubiqd stopped cleanly")
	return nil
}
