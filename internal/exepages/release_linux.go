package exepages

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Release drops the resident pages of this process's executable that
// Select allows (MADV_DONTNEED) and returns the resident bytes they held.
// An error (no /proc, a mapping the kernel refuses) leaves the rest as it
// was; nothing breaks without it, the pages only stay resident.
func Release() (int64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/exe", &st); err != nil {
		return 0, fmt.Errorf("exepages: %w", err)
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, fmt.Errorf("exepages: %w", err)
	}
	ms, err := ParseSmaps(f)
	f.Close()
	if err != nil {
		return 0, fmt.Errorf("exepages: /proc/self/smaps: %w", err)
	}
	var n int64
	for _, m := range Select(ms, unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino) {
		if _, _, e := unix.Syscall(unix.SYS_MADVISE, m.Start, m.End-m.Start, unix.MADV_DONTNEED); e != 0 {
			return n, fmt.Errorf("exepages: madvise %x-%x %s: %w", m.Start, m.End, m.Path, e)
		}
		n += m.Rss
	}
	return n, nil
}
