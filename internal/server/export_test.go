package server

// OpenStreams counts the event streams Stream holds open (tests).
func (s *Server) OpenStreams() int {
	s.streams.mu.Lock()
	defer s.streams.mu.Unlock()
	return len(s.streams.m)
}
