package driver

import (
	"encoding/json"
	"slices"

	"github.com/acptap/acptap/internal/acp"
)

// permissionMethod is the agent request whose recorded answer names one of
// the options the request offered.
const permissionMethod = "session/request_permission"

// A permissionOption is one choice of a permission request.
type permissionOption struct {
	OptionID string `json:"optionId"`
	Kind     string `json:"kind"`
}

// permissionByKind returns line, the recorded answer to live permission
// request q as it is to be sent, with its selected option the live
// request's option of the kind the recorded answer chose: an agent that
// renamed or reordered its options since the recording gets the choice
// the editor made, by kind (allow_once, reject_always, ...). If the live
// request offers no option of that kind, the answer is "cancelled" and a
// *PermissionKindError says so. Any other answer (cancelled, or one whose
// option the recorded request did not offer) is sent as recorded.
func (r *run) permissionByKind(q queued, line []byte) []byte {
	req, ok := r.p.request(q.k)
	if !ok {
		return line
	}
	recReq, ok1 := r.frame(req)
	recAns, ok2 := r.frame(int(q.a.frame))
	if !ok1 || !ok2 {
		return line
	}
	chosen := selectedOption(acp.Parse(recAns).Result)
	if chosen == "" {
		return line
	}
	recorded := offered(acp.Parse(recReq).Params)
	j := slices.IndexFunc(recorded, func(o permissionOption) bool { return o.OptionID == chosen })
	if j < 0 || recorded[j].Kind == "" {
		return line
	}
	kind := recorded[j].Kind
	live := offered(q.params)
	i := slices.IndexFunc(live, func(o permissionOption) bool { return o.Kind == kind })
	if i < 0 {
		kinds := make([]string, len(live))
		for j, o := range live {
			kinds[j] = o.Kind
		}
		r.errs = append(r.errs, &PermissionKindError{N: q.k.n, Kind: kind, Offered: kinds})
		return withOutcome(line, map[string]string{"outcome": "cancelled"})
	}
	if selectedOption(acp.Parse(line).Result) == live[i].OptionID {
		return line
	}
	return withOutcome(line, map[string]string{"outcome": "selected", "optionId": live[i].OptionID})
}

// offered returns the options of a permission request's params.
func offered(params json.RawMessage) []permissionOption {
	var p struct {
		Options []permissionOption `json:"options"`
	}
	json.Unmarshal(params, &p)
	return p.Options
}

// selectedOption returns the optionId of a permission answer's result
// whose outcome is "selected", else "".
func selectedOption(result json.RawMessage) string {
	var r struct {
		Outcome struct {
			Outcome  string `json:"outcome"`
			OptionID string `json:"optionId"`
		} `json:"outcome"`
	}
	if json.Unmarshal(result, &r) != nil || r.Outcome.Outcome != "selected" {
		return ""
	}
	return r.Outcome.OptionID
}

// withOutcome returns the response line with its result's outcome
// replaced by outcome, the rest of the result kept; line itself if it is
// not a response with an object result.
func withOutcome(line []byte, outcome map[string]string) []byte {
	var msg map[string]json.RawMessage
	if json.Unmarshal(line, &msg) != nil {
		return line
	}
	var result map[string]json.RawMessage
	if json.Unmarshal(msg["result"], &result) != nil || result == nil {
		return line
	}
	result["outcome"], _ = json.Marshal(outcome)
	msg["result"], _ = json.Marshal(result)
	out, err := json.Marshal(msg)
	if err != nil {
		return line
	}
	return out
}
