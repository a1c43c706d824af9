package event

// LiveForm gives a stored event as the events a run's consumer receives
// live: a stored text_end (holding the text) as start, delta, end; a stored
// tool_call_end (holding the arguments) as start, arguments, end.
func LiveForm(e Event) []Event {
	switch e.Type {
	case TextEnd:
		if e.Content == "" {
			return []Event{e}
		}
		start, delta, end := e, e, e
		start.Type, start.Content, start.Seq = TextStart, "", 0
		delta.Type, delta.Content, delta.Delta, delta.Seq = TextDelta, "", e.Content, 0
		return []Event{start, delta, end}
	case ToolCallEnd:
		start, args, end := e, e, e
		start.Type, start.Arguments, start.Seq = ToolCallStart, "", 0
		args.Type, args.Arguments, args.Delta, args.Seq = ToolCallArgs, "", e.Arguments, 0
		return []Event{start, args, end}
	}
	return []Event{e}
}
