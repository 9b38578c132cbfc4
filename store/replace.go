package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

var (
	// ErrPlacement means a frame given to ReplaceLane is placed after an
	// event that the recording does not hold, that belongs to the
	// replaced lane, or that comes before the event of the frame before.
	ErrPlacement = errors.New("bad frame placement")

	// ErrNotFrameLane means ReplaceLane was given a lane that holds no
	// frames.
	ErrNotFrameLane = errors.New("not a lane of frames")
)

// Placed is a frame that ReplaceLane puts into a recording, and where.
type Placed struct {
	// After is the Seq, in the recording as stored before ReplaceLane,
	// of the event the frame comes right after: an event of another
	// lane, or 0 for the start of the recording. Frames placed after the
	// same event keep their order.
	After uint64
	// Offset is the frame's time since the recording started.
	Offset time.Duration
	// Data is the line without its '\n', at most MaxDataSize bytes.
	Data []byte
}

// ReplaceLane replaces every frame of lane (LaneEditor, LaneAgent or
// LaneStderr) of the named recording by frames, in one transaction: the
// recording is rebuilt, or left as it was on error.
//
// The events of the other lanes keep their order, offsets, flags and data;
// LLM exchanges keep their stored values byte for byte. The frames, whose
// After must not decrease from one to the next, are placed among them,
// without flags. The events are then renumbered 1 to N in their new order,
// the counters recounted and Updated set to now; the rest of the metadata
// is kept, but for Format, which becomes FormatVersion.
//
// The Store must be writable, and no Writer, of any process, may be
// writing the recording (ErrBusy).
func (s *Store) ReplaceLane(name string, lane Lane, frames []Placed) error {
	const op = "update"
	if err := ValidName(name); err != nil {
		return err
	}
	if lane != LaneEditor && lane != LaneAgent && lane != LaneStderr {
		return s.wrap(op, name, fmt.Errorf("%w: %v", ErrNotFrameLane, lane))
	}
	for i, f := range frames {
		if len(f.Data) > MaxDataSize {
			return s.wrap(op, name, fmt.Errorf("new frame %d: %d bytes of data exceed the limit of %d", i, len(f.Data), MaxDataSize))
		}
		if i > 0 && f.After < frames[i-1].After {
			return s.wrap(op, name, fmt.Errorf("%w: new frame %d goes after event %d, before the event %d of the frame before it",
				ErrPlacement, i, f.After, frames[i-1].After))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writable(op, name); err != nil {
		return err
	}
	updated := time.Now().Round(0)
	return s.update(op, name, func(tx *bolt.Tx) error {
		b, err := recording(tx, name)
		if err != nil {
			return err
		}
		meta, err := readKnownMeta(b, name)
		if err != nil {
			return err
		}
		if err := s.notLive(name); err != nil {
			return err
		}
		eb := b.Bucket(eventsBucket)
		if eb == nil {
			return errors.New("events bucket missing")
		}
		// Its pages are read, then freed (walked) by DeleteBucket.
		if err := walkable(eb, name, true); err != nil {
			return err
		}
		kept, err := keptEvents(eb, lane)
		if err != nil {
			return err
		}
		rebuilt, err := placeFrames(kept, lane, frames)
		if err != nil {
			return err
		}
		if err := b.DeleteBucket(eventsBucket); err != nil {
			return err
		}
		if eb, err = b.CreateBucket(eventsBucket); err != nil {
			return err
		}
		// Keys are put in increasing order: fill the pages.
		eb.FillPercent = 1
		c, err := rebuilt.put(eb)
		if err != nil {
			return err
		}
		meta.Format = FormatVersion
		meta.Frames, meta.Exchanges = c.frames, c.exchanges
		meta.Updated = updated
		v, err := encodeMeta(&meta)
		if err != nil {
			return err
		}
		return b.Put(metaKey, v)
	})
}

// eventList is a recording's events being rebuilt: raws[i], if not nil,
// is the stored value of events[i], kept as it is (an exchange, whose
// Event has no Data); otherwise events[i] is a frame to encode.
type eventList struct {
	events []Event
	raws   [][]byte
}

func (l *eventList) add(e Event, raw []byte) {
	l.events = append(l.events, e)
	l.raws = append(l.raws, raw)
}

// keptEvents reads the events of eb but the frames of lane. Frames are
// decoded, other events kept as stored values, copied out of the
// transaction's memory.
func keptEvents(eb *bolt.Bucket, lane Lane) (*eventList, error) {
	kept := &eventList{}
	var block []Event // reused from block to block
	var next uint64   // the smallest Seq the next value may hold
	c := eb.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if len(k) != 8 || v == nil {
			return nil, fmt.Errorf("stray key %s among events", quoteKey(k))
		}
		seq := binary.BigEndian.Uint64(k)
		if seq < next {
			return nil, fmt.Errorf("event %d: stored again after a frame block up to event %d", seq, next-1)
		}
		kind, n, err := valueSpan(seq, v)
		if err != nil {
			return nil, fmt.Errorf("event %d: %w", seq, err)
		}
		next = seq + n
		switch {
		case kind != KindFrame:
			kept.add(Event{Seq: seq, Kind: kind, Lane: Lane(v[2])}, bytes.Clone(v))
		case v[0] == eventEncoding && Lane(v[2]) == lane:
			// A frame of the replaced lane: not even decoded.
		default:
			block, err = decodeValue(block[:0], seq, v)
			if err != nil {
				return nil, fmt.Errorf("event %d: %w", seq, err)
			}
			for _, e := range block {
				if e.Lane != lane {
					kept.add(e, nil)
				}
			}
		}
	}
	return kept, nil
}

// placeFrames returns the events of kept with frames of lane placed among
// them, renumbered from 1.
func placeFrames(kept *eventList, lane Lane, frames []Placed) (*eventList, error) {
	n := len(kept.events) + len(frames)
	out := &eventList{events: make([]Event, 0, n), raws: make([][]byte, 0, n)}
	i := 0
	place := func(after uint64) {
		for ; i < len(frames) && frames[i].After == after; i++ {
			f := &frames[i]
			out.add(Event{Kind: KindFrame, Lane: lane, Offset: f.Offset, Data: f.Data}, nil)
		}
	}
	place(0)
	for j, e := range kept.events {
		out.add(e, kept.raws[j])
		place(e.Seq)
	}
	if i < len(frames) {
		return nil, fmt.Errorf("%w: new frame %d goes after event %d, which is no event of another lane", ErrPlacement, i, frames[i].After)
	}
	for j := range out.events {
		out.events[j].Seq = uint64(j + 1)
	}
	return out, nil
}

// put stores l in the empty bucket eb, frames in blocks as the Writer
// packs them, and returns the counters.
func (l *eventList) put(eb *bolt.Bucket) (counts, error) {
	var c counts
	for j := 0; j < len(l.events); {
		if raw := l.raws[j]; raw != nil {
			e := &l.events[j]
			if err := eb.Put(seqKey(e.Seq), raw); err != nil {
				return c, fmt.Errorf("event %d: %w", e.Seq, err)
			}
			c.add(e.Kind, 1)
			j++
			continue
		}
		run := j + 1
		for run < len(l.events) && l.raws[run] == nil {
			run++
		}
		for frames := l.events[j:run]; len(frames) > 0; {
			var v []byte
			var err error
			n := blockRun(frames)
			if n > 0 {
				v, err = encodeBlock(frames[:n])
			} else {
				// Too big for a block: an event value of its own.
				n = 1
				v, err = encodeEvent(&frames[0])
			}
			if err == nil {
				err = eb.Put(seqKey(frames[0].Seq), v)
			}
			if err != nil {
				return c, fmt.Errorf("event %d: %w", frames[0].Seq, err)
			}
			c.add(KindFrame, n)
			frames = frames[n:]
		}
		j = run
	}
	return c, nil
}
