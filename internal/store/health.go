package store

import (
	"errors"
	"sync"
	"time"
)

// WriteStatus is the outcome of a store's latest write: what readiness
// (/healthz) reads to tell a store that answers reads but cannot write.
type WriteStatus struct {
	// At is when that write ended; zero before the first.
	At time.Time
	// Err is why it failed when the database could not take it (it wraps
	// ErrUnavailable: a full disk, a read-only or failing file system, the
	// connection lost); nil when it committed.
	Err error
}

// WriteHealth keeps a driver's WriteStatus. It is safe for concurrent use;
// the zero value knows of no write.
type WriteHealth struct {
	mu sync.Mutex
	st WriteStatus
}

// Record notes the outcome of a write that ended at now: nil when it
// committed, else the database's failure (ErrUnavailable). Any other error
// (a conflict, a lost lease, a refused value) says nothing of the database
// and is not recorded; neither is an outcome older than the one recorded.
// The driver leaves out failures that say nothing of the database's
// writes: the caller's cancellation, contention between writers, a lost
// connection (Ping sees it).
func (h *WriteHealth) Record(now time.Time, err error) {
	if err != nil && !errors.Is(err, ErrUnavailable) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if now.Before(h.st.At) {
		return
	}
	h.st = WriteStatus{At: now, Err: err}
}

// Status returns the latest outcome recorded.
func (h *WriteHealth) Status() WriteStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.st
}
