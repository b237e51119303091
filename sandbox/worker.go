package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"qubiq.dev/edge/sandbox/rpc"
)

// frame is one decoded frame from a worker, or the error that ended its stream.
type frame struct {
	msg any
	err error
}

// worker is one running Python worker process.
type worker struct {
	pid    int
	cmd    *exec.Cmd
	toW    *os.File // daemon → worker (the worker's fd 4)
	fromW  *os.File // worker → daemon (the worker's fd 3)
	wr     *rpc.Writer
	frames chan frame
	stop   chan struct{} // closed when the worker is discarded: the reader stops
	exited chan struct{} // closed after Wait returned
	state  *os.ProcessState
	out    *tailBuffer
	conf   confined

	python  string                 // version from the ready frame
	cached  map[string]*moduleCode // module → the code the worker last compiled
	runs    int
	threads int         // thread count after the handshake: more after a run means a leaked thread
	killed  atomic.Bool // set when the daemon killed it
	discard sync.Once
	gen     uint64    // the packages generation it was started with (Pool.pkgSeq)
	started time.Time // when its handshake completed

	// wmu serialises writes to the worker: exec frames from the slot's
	// goroutine, results from the reader.
	wmu sync.Mutex
	// bound is the execution in flight: its id and how its calls are
	// served. The reader serves call frames itself (no hand-off to another
	// goroutine on the hot path of system.* calls); it clears bound when it
	// sees the run's done frame, so no call after it is served.
	bound atomic.Pointer[binding]
}

// binding is one execution's id and the function that serves its calls
// with the execution's grant and context (captured in the closure; nothing
// a worker sends can change them).
type binding struct {
	execID string
	serve  func(*rpc.Call) *rpc.Result
	// batch, for a node run (RunNodes), takes the run's item and log
	// frames in the reader itself (no hand-off per message); it returns
	// false for a frame the run did not expect, which then goes to the
	// slot as a protocol violation.
	batch func(msg any) bool
}

// confined is the OS confinement of one worker slot: cgroup leaves or
// rlimits applied by the sandbox-exec helper. The zero confinement (nil)
// starts Python directly in its own process group.
type confined interface {
	// helperArgs are the sandbox-exec options that confine the worker, or
	// nil when the helper is not needed.
	helperArgs() []string
	// cgroupFD is a cgroup2 directory fd to start the worker in
	// (CLONE_INTO_CGROUP), or -1.
	cgroupFD() int
	// killAll kills every process of the slot.
	killAll() error
	// oomKills returns the slot's OOM kill counter, and false when the mode
	// has none.
	oomKills() (uint64, bool)
}

// tailBuffer keeps the last bytes a worker wrote to stdout and stderr.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

const tailMax = 8 << 10

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailMax {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailMax:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

// newExecID returns a random 64-bit execution id in hex.
func newExecID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("sandbox: crypto/rand failed: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

// startWorker starts one worker and completes its handshake: hello from the
// daemon, ready from the worker, within the start timeout.
func (p *Pool) startWorker(ctx context.Context, conf confined) (*worker, error) {
	fromR, fromW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: pipe: %w", err)
	}
	toR, toW, err := os.Pipe()
	if err != nil {
		fromR.Close()
		fromW.Close()
		return nil, fmt.Errorf("sandbox: pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		fromR.Close()
		fromW.Close()
		toR.Close()
		toW.Close()
		return nil, fmt.Errorf("sandbox: pipe: %w", err)
	}
	argv := []string{p.python, "-I", "-S", p.codeDir + "/" + workerScript, p.codeDir}
	var hargs []string
	if conf != nil {
		if hargs = conf.helperArgs(); hargs != nil {
			argv = append(append(append([]string{p.selfExe, helperArg}, hargs...), "--"), argv...)
		}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = childEnv(p.homeDir)
	cmd.Dir = p.homeDir
	cmd.Stdout = outW
	cmd.Stderr = outW
	cmd.ExtraFiles = []*os.File{fromW, toR} // fds 3 and 4
	attr := &syscall.SysProcAttr{Setpgid: true}
	userNSFor(attr, hargs) // a daemon that is not root: the network namespace needs a user namespace
	if conf != nil {
		if fd := conf.cgroupFD(); fd >= 0 {
			attr.UseCgroupFD = true
			attr.CgroupFD = fd
		}
	}
	cmd.SysProcAttr = attr
	startErr := cmd.Start()
	fromW.Close()
	toR.Close()
	outW.Close()
	if startErr != nil {
		fromR.Close()
		toW.Close()
		outR.Close()
		return nil, fmt.Errorf("sandbox: start %s: %w", argv[0], startErr)
	}
	w := &worker{
		pid:    cmd.Process.Pid,
		cmd:    cmd,
		toW:    toW,
		fromW:  fromR,
		wr:     rpc.NewWriter(toW),
		frames: make(chan frame),
		stop:   make(chan struct{}),
		exited: make(chan struct{}),
		out:    &tailBuffer{},
		conf:   conf,
		cached: map[string]*moduleCode{},
	}
	go func() {
		_, _ = io.Copy(w.out, outR) // diagnostics only: the tail shows in errors and logs
		outR.Close()
	}()
	go func() {
		_ = cmd.Wait() // the state is read from w.state
		w.state = cmd.ProcessState
		close(w.exited)
	}()
	go w.read()

	hello, gen := p.hello()
	w.gen = gen
	if err := w.handshake(ctx, hello, p.startTimeout); err != nil {
		w.kill()
		w.waitExit(2 * time.Second)
		w.close()
		return nil, err
	}
	w.started = time.Now()
	return w, nil
}

// read decodes frames from the worker until its stream ends or the worker is
// discarded. It serves the call frames of the bound execution itself and
// hands every other frame (and calls that do not name the bound execution,
// which the slot treats as protocol violations) to the slot's goroutine.
func (w *worker) read() {
	r := rpc.NewReader(w.fromW)
	for {
		b, err := r.ReadFrame()
		var f frame
		if err != nil {
			f.err = err
		} else {
			f.msg, f.err = rpc.Decode(b)
			switch m := f.msg.(type) {
			case *rpc.Call:
				if bd := w.bound.Load(); bd != nil && m.Exec == bd.execID {
					res := bd.serve(m)
					if err := w.sendResult(res); err != nil {
						w.kill() // the slot sees it exit
					}
					continue
				}
			case *rpc.Item, *rpc.Log:
				if bd := w.bound.Load(); bd != nil && bd.batch != nil && execOf(m) == bd.execID && bd.batch(m) {
					continue
				}
			case *rpc.Done:
				if bd := w.bound.Load(); bd != nil && m.Exec == bd.execID {
					w.bound.CompareAndSwap(bd, nil)
				}
			}
		}
		select {
		case w.frames <- f:
		case <-w.stop:
			return
		}
		if f.err != nil {
			return
		}
	}
}

// execOf is the execution id of an item or log frame.
func execOf(m any) string {
	switch x := m.(type) {
	case *rpc.Item:
		return x.Exec
	case *rpc.Log:
		return x.Exec
	}
	return ""
}

func (w *worker) handshake(ctx context.Context, hello *rpc.Hello, timeout time.Duration) error {
	if err := w.send(hello); err != nil {
		return fmt.Errorf("sandbox: worker %d: send hello: %w", w.pid, err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case f := <-w.frames:
		if f.err != nil {
			w.waitExit(time.Second)
			return fmt.Errorf("sandbox: worker %d failed its handshake: %v%s", w.pid, f.err, w.outputNote())
		}
		r, ok := f.msg.(*rpc.Ready)
		if !ok || r.Python == "" {
			return fmt.Errorf("sandbox: worker %d failed its handshake: first frame is %T, not ready", w.pid, f.msg)
		}
		w.python = r.Python
		if _, n, err := w.rss(); err == nil {
			w.threads = n
		}
		return nil
	case <-w.exited:
		return fmt.Errorf("sandbox: worker %d exited during its handshake (%s)%s", w.pid, w.exitText(), w.outputNote())
	case <-t.C:
		return fmt.Errorf("sandbox: worker %d did not answer hello within %v%s", w.pid, timeout, w.outputNote())
	case <-ctx.Done():
		return fmt.Errorf("sandbox: worker %d: handshake: %w", w.pid, ctx.Err())
	}
}

// send writes one message to the worker.
func (w *worker) send(v any) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	if err := w.wr.WriteMessage(v); err != nil {
		return fmt.Errorf("sandbox: worker %d: send: %w", w.pid, err)
	}
	return nil
}

// sendResult writes the answer to a call. An answer too large for a frame
// is sent as a failed call instead.
func (w *worker) sendResult(r *rpc.Result) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	err := w.wr.WriteResult(r)
	if errors.Is(err, rpc.ErrFrameTooLarge) {
		r.OK, r.Value, r.Binary = false, nil, nil
		r.Error = &rpc.CallError{Kind: "error", Message: "the answer exceeds the 16 MiB frame limit"}
		err = w.wr.WriteMessage(r)
	}
	if err != nil {
		return fmt.Errorf("sandbox: worker %d: send: %w", w.pid, err)
	}
	return nil
}

// kill kills the worker's whole process group and, when confined, every
// process of its cgroup. It is safe from any goroutine and more than once.
func (w *worker) kill() {
	w.killed.Store(true)
	// ESRCH (already gone) is the only expected error; the exit is observed
	// through w.exited either way.
	_ = syscall.Kill(-w.pid, syscall.SIGKILL)
	if w.conf != nil {
		_ = w.conf.killAll()
	}
}

// waitExit waits up to d for the process to be reaped.
func (w *worker) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.exited:
		return true
	case <-t.C:
		return false
	}
}

// close releases the daemon's ends of the pipes and stops the reader.
func (w *worker) close() {
	w.discard.Do(func() {
		close(w.stop)
		w.toW.Close()
		w.fromW.Close()
	})
}

// exitText describes how the process ended: "exit status 3", "signal: killed".
func (w *worker) exitText() string {
	select {
	case <-w.exited:
	default:
		return "still running"
	}
	if w.state == nil {
		return "unknown"
	}
	return w.state.String()
}

// killedBySignal reports whether the process ended by SIGKILL.
func (w *worker) killedBySignal() bool {
	if w.state == nil {
		return false
	}
	ws, ok := w.state.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

func (w *worker) outputNote() string {
	if s := w.out.String(); s != "" {
		return ": " + tail(s, 600)
	}
	return ""
}

// rss returns the worker's resident memory in bytes and its thread count,
// from /proc/<pid>/status.
func (w *worker) rss() (int64, int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(w.pid) + "/status")
	if err != nil {
		return 0, 0, err
	}
	var rss int64
	threads := 0
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "VmRSS:"):
			f := strings.Fields(line)
			if len(f) >= 2 {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				rss = kb << 10
			}
		case strings.HasPrefix(line, "Threads:"):
			f := strings.Fields(line)
			if len(f) >= 2 {
				threads, _ = strconv.Atoi(f[1])
			}
		}
	}
	if rss == 0 {
		return 0, 0, errors.New("no VmRSS")
	}
	return rss, threads, nil
}
