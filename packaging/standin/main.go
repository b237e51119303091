// Command standin is a stand-in for qubiqd in the flash harness
// (packaging/harness_integration_test.go): a daemon that does, in a few
// lines, what qubiqd does for the appliance once wired, so the A/B flow can
// be tested end to end before it is: it opens the store (refusing a newer
// schema with the slot agent's explanation), serves /api/v1/health and POST
// /api/v1/firmware (firmware.Flash, then exit 75 for systemd to restart
// it), tells systemd it is ready, feeds the watchdog, logs to the journal,
// and confirms a trial slot after a healthy period (slots.RunTrial).
//
// Its behaviour is set when it is built, with -ldflags -X:
// main.version (the firmware version), main.healthy ("no": health stays
// failed, so a trial never confirms), main.schema ("2": it migrates the
// store to schema 2 at start, as a newer firmware would).
//
//	standin --config FILE     (the daemon config: data_dir, http.listen)
//
// Environment (the harness's stand-ins for config keys not wired yet):
// QUBIQ_SLOTS_ROOT, QUBIQ_TRUSTED_KEYS, QUBIQ_CONFIRM_AFTER,
// QUBIQ_TRIAL_TIMEOUT.
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	"gopkg.in/yaml.v3"

	"qubiq.dev/edge/firmware"
	"qubiq.dev/edge/slots"
	"qubiq.dev/edge/store"
	"qubiq.dev/edge/systemd"
)

var (
	version = "0.0.0"
	healthy = "yes"
	schema  = "1"
)

// exitRestart asks systemd for a restart (the unit's RestartForceExitStatus).
const exitRestart = 75

func main() { os.Exit(run()) }

func run() int {
	cfgPath := flag.String("config", "/etc/qubiq/qubiq.yaml", "daemon config")
	flag.Parse()
	log, _, err := systemd.NewLogger(slog.LevelInfo, systemd.LogOptions{Identifier: "qubiqd"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	log = log.With("version", version)
	var cfg struct {
		DataDir string `yaml:"data_dir"`
		HTTP    struct {
			Listen string `yaml:"listen"`
		} `yaml:"http"`
	}
	b, err := os.ReadFile(*cfgPath)
	if err == nil {
		err = yaml.Unmarshal(b, &cfg)
	}
	if err != nil {
		log.Error("config", "err", err)
		return 1
	}
	if !filepath.IsAbs(cfg.DataDir) {
		cfg.DataDir = filepath.Join(filepath.Dir(*cfgPath), cfg.DataDir)
	}
	l := slots.Layout{Root: envOr("QUBIQ_SLOTS_ROOT", slots.DefaultRoot), DataDir: cfg.DataDir}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	// The store, as qubiqd opens it; a newer schema gets the slot agent's
	// explanation of what to do.
	dbPath := filepath.Join(cfg.DataDir, store.FileName)
	db, err := store.Open(dbPath, store.Options{Timeout: 2 * time.Second})
	if err != nil {
		log.Error("store", "err", slots.ExplainStoreError(l, err))
		return 1
	}
	if err := db.PutMeta("last_opened_by", []byte(version)); err != nil {
		log.Error("store", "err", err)
		return 1
	}
	db.Close()
	bdb, err := bolt.Open(dbPath, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		log.Error("store", "err", err)
		return 1
	}
	defer bdb.Close()
	if schema == "2" { // a newer firmware's migration
		err := bdb.Update(func(tx *bolt.Tx) error {
			var k [8]byte
			binary.BigEndian.PutUint64(k[:], 2)
			return tx.Bucket([]byte("meta")).Put([]byte("schema_version"), k[:])
		})
		if err != nil {
			log.Error("migrate", "err", err)
			return 1
		}
		log.Info("store schema migrated", "from", 1, "to", 2)
	}

	restart := make(chan struct{}, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/health", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		st := "ok"
		if healthy != "yes" {
			st = "failed"
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		writeJSON(w, map[string]any{"status": st, "version": version})
	})
	mux.HandleFunc("POST /api/v1/firmware", func(w http.ResponseWriter, r *http.Request) {
		keys, err := firmware.LoadTrustedKeys(envOr("QUBIQ_TRUSTED_KEYS", firmware.DefaultTrustedKeys))
		var res firmware.Result
		if err == nil {
			res, err = firmware.Flash(r.Context(), r.Body, firmware.FlashOptions{Layout: l, Keys: keys, Force: r.URL.Query().Get("force") == "1",
				Progress: func(n int64) { log.Debug("firmware upload", "bytes", n) }})
		}
		if err != nil {
			log.Warn("firmware refused", "err", err)
			code := http.StatusUnprocessableEntity
			switch firmware.Kind(err) {
			case "busy", "downgrade", "arch", "upgrade_path":
				code = http.StatusConflict
			case "too_large":
				code = http.StatusRequestEntityTooLarge
			case "":
				code = http.StatusInternalServerError
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			writeJSON(w, map[string]any{"error": map[string]any{"kind": firmware.Kind(err), "detail": err.Error()}})
			return
		}
		writeJSON(w, res)
		log.Info("firmware staged; restarting to install it", "version", res.Version, "slot", res.Slot)
		restart <- struct{}{}
	})
	ln, err := net.Listen("tcp", cfg.HTTP.Listen)
	if err != nil {
		log.Error("listen", "err", err)
		return 1
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	systemd.ReadyStatus("stand-in " + version)

	wd := systemd.NewWatchdog(systemd.WatchdogOptions{Logger: log})
	wd.Check("api", systemd.HTTPCheck(nil, "http://"+ln.Addr().String()+"/api/v1/health"))
	go wd.Run(ctx)

	trial := make(chan error, 1)
	go func() {
		trial <- slots.RunTrial(ctx, l, slots.TrialOptions{
			ConfirmAfter: envDur("QUBIQ_CONFIRM_AFTER", 2*time.Minute), Timeout: envDur("QUBIQ_TRIAL_TIMEOUT", 10*time.Minute),
			Logger: log, Healthy: func(context.Context) error {
				if healthy != "yes" {
					return errors.New("health: failed")
				}
				return nil
			}})
	}()
	for {
		select {
		case <-ctx.Done():
			systemd.Stopping()
			return 0
		case <-restart:
			time.Sleep(100 * time.Millisecond) // the answer reaches the client
			systemd.Stopping()
			return exitRestart
		case err := <-trial:
			if err != nil {
				log.Error("trial failed; exiting for systemd to restart (qubiq-slot counts the start)", "err", err)
				return 1
			}
		}
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func envDur(k string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(k)); err == nil {
		return d
	}
	return def
}
