// Package cgroup confines QUBIQ Edge's Python workers with Linux control
// groups: it detects the isolation mode once, per controller,
// creates one leaf per worker slot, writes the configured limits, kills every
// process of a leaf, reads OOM kill counters and removes what it created.
//
// # Why hand-written
//
// The daemon writes about ten cgroupfs files. containerd/cgroups brings the
// OCI runtime spec, cilium/ebpf, godbus, go-systemd and protobuf with it, its
// Mode() only looks at /sys/fs/cgroup, its v1 New creates directories in
// every mounted hierarchy, and it knows nothing of the delegation order that
// cgroup v2 requires (the daemon must move itself into a leaf before it may
// enable controllers for its children: the no-internal-processes rule of
// the kernel's Documentation/admin-guide/cgroup-v2.rst) nor of
// CLONE_INTO_CGROUP. This package
// does exactly what the sandbox needs and is tested against fake trees.
//
// # Modes
//
//   - cgroup2: a cgroup2 mount whose cgroup (from /proc/self/cgroup) offers
//     the memory and pids controllers and where a directory can be made. The
//     daemon moves itself to <its cgroup>/supervisor unless it is there
//     already, enables the controllers, and starts workers straight into
//     their leaf through a directory fd (SysProcAttr.UseCgroupFD).
//   - cgroup1: writable v1 memory and pids hierarchies (cpu when present);
//     the sandbox-exec helper joins the leaves itself before it executes
//     Python, so Python never runs outside them.
//   - rlimit: nothing writable; the helper sets rlimits on itself.
//   - none: not even the helper is available.
//
// A hybrid host with a cgroup2 mount that offers neither memory nor pids
// (the dev VM: /sys/fs/cgroup/unified with hugetlb only) is cgroup1.
//
// cgroup imports the standard library and golang.org/x/sys/unix only.
package cgroup
