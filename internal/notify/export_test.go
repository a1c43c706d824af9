package notify

// InFlight counts the attempts under way (tests).
func (d *Dispatcher) InFlight() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, b := range d.busy {
		n += b
	}
	return n
}
