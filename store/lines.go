package store

// Lines calls fn with each event of the named recording, as Events does,
// but with a stdio line recorded in pieces (FlagContinued) passed once,
// whole, when its last piece is read: its Seq, Kind and Offset are its
// first piece's, its Flags its last piece's, and its Data the pieces
// joined, in an array of its own. Other events are passed as Events
// passes them, so a joined line may come after events of other lanes
// with greater Seqs. A line whose last piece was never written (the
// recording ended within it) is not passed. This is the one place the
// pieces of a line are joined; everything that reads whole lines reads
// them here.
func (s *Store) Lines(name string, fn func(Event) error) error {
	return s.Events(name, JoinLines(fn))
}

// JoinLines returns a callback for Events or EventsFrom that passes the
// events it gets to fn with the pieces of each line joined, as Lines does.
func JoinLines(fn func(Event) error) func(Event) error {
	var pending map[Lane]*Event // a line's pieces so far, by lane
	return func(e Event) error {
		if e.Kind != KindFrame {
			return fn(e)
		}
		p := pending[e.Lane]
		if p == nil && e.Flags&FlagContinued == 0 {
			return fn(e)
		}
		if p == nil {
			if pending == nil {
				pending = map[Lane]*Event{}
			}
			first := e
			// A copy: an event's Data shares its block's array.
			first.Data = append([]byte(nil), e.Data...)
			pending[e.Lane] = &first
			return nil
		}
		p.Data = append(p.Data, e.Data...)
		if e.Flags&FlagContinued != 0 {
			return nil
		}
		delete(pending, e.Lane)
		p.Flags = e.Flags
		return fn(*p)
	}
}
