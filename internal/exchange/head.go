package exchange

// headFields are the fields UnmarshalHead decodes.
const headFields = 1<<fieldRoute | 1<<fieldMCPServer | 1<<fieldMethod | 1<<fieldURL | 1<<fieldStatus | 1<<fieldRequestBody

// UnmarshalHead decodes what a replay reads of a recorded exchange before
// it serves it, its head: Route, MCPServer, Method, URL, Status and
// RequestBody, as
// Unmarshal decodes them; the other fields may be left zero. It also
// returns rest, the text of the exchange with its request body taken out,
// which is what the replay keeps to serve the exchange from: Unmarshal of
// rest, with the head's RequestBody put in, is Unmarshal of data, and
// decodes no request body a second time.
//
// What Marshal writes is checked as a whole, JSON text and field names,
// but the values of the fields other than the head's are skipped rather
// than decoded, above all the response's chunks, which Unmarshal of rest
// decodes: an exchange whose head decodes may still fail Unmarshal. Text
// that Unmarshal's fast path would not take is decoded by Unmarshal,
// whole, with its error, and rest is then data.
func UnmarshalHead(data []byte) (head *Exchange, rest []byte, err error) {
	e, body, ok := decodeFields(data, headFields)
	if !ok {
		e, err := unmarshalJSON(data)
		if err != nil {
			return nil, nil, err
		}
		return e, data, nil
	}
	if body == nil {
		return e, data, nil
	}
	// body is of data: where it starts is what data has beyond it.
	at := cap(data) - cap(body)
	rest = make([]byte, 0, len(data)-len(body)+len("null"))
	rest = append(append(append(rest, data[:at]...), "null"...), data[at+len(body):]...)
	return e, rest, nil
}
