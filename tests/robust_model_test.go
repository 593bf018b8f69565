package tests

// The sequential specification the history checker (robust_test.go) holds
// the API to: one domain's licenses, whatever consumer asks. porcupine
// checks each domain's operations apart (Partition), which keeps the
// search small.
//
// A state is what the domain could be after the operations linearized so
// far: who holds it and under which license, the intents still open that
// may yet take effect (a create answered 202, a revoke whose outcome was
// unknown, a site the vendor deleted whose webhook may still come), the
// answers stored under keys and the licenses revoked. The open intents make
// the model non-deterministic: before any operation, any of them may have
// taken effect (the reconciler, the vendor's webhook), so a step is taken
// from every state they can lead to, as etcd's robustness model does with
// its "may have happened" requests.

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
)

// Kinds of operation in a history.
const (
	robustCreate       = "create"        // POST /api/licenses
	robustRevoke       = "revoke"        // DELETE /api/licenses/{id}
	robustShow         = "show"          // GET /api/licenses/{id}
	robustList         = "list"          // GET /api/licenses, one domain's part of it
	robustVendorDelete = "vendor-delete" // the vendor deleted the license's site on its own
)

// robustInput is an operation as it was sent.
type robustInput struct {
	Kind     string
	Consumer string
	Domain   string
	Key      string // a create's Idempotency-Key; "" when keyless
	Name     string // a create's body is its name and domain
	ID       string // the license of a revoke, show or vendor delete
	Op       int    // the operation's number in the history: names a keyless intent
	Serve    int    // the serve it was sent to (-1: none)
	Intent   string // the operation a 202 named (not part of the model: its reservation bounds the return)
}

// robustOutput is what the operation was answered. Status 0 is no answer
// (a timeout, a connection lost): the operation may or may not have taken
// effect, and its Return is when the process that held it died, or never.
type robustOutput struct {
	Status   int
	Code     string // the error's code
	ID       string // the license answered (a create, a show; a list's one license of the domain, "" for none)
	LStatus  string // its status
	Replayed bool   // Idempotent-Replayed: true
}

// robustState is one possible state of a domain. Every list is sorted, so
// that equal states have equal keys.
type robustState struct {
	holder  string   // the consumer whose license holds the domain; "" when free
	lic     string   // its id; "?tag" while it is one the reconciler made, not seen yet
	pending []string // open creates that may still take effect: "consumer|tag"
	revokes []string // revokes whose outcome is unknown: the licenses they may still revoke
	doomed  []string // licenses whose site the vendor deleted: its webhook may still revoke them
	keys    []string // answers stored under keys: "key=license"
	revoked []string // licenses revoked
	key     string   // the state, canonical, for Equal and Hash
}

// robustMaxStates bounds the states a step fans out to (a history that
// needs more is reported as unknown rather than let run away).
const robustMaxStates = 512

func (s robustState) seal() *robustState {
	s.key = s.holder + "/" + s.lic + "/" + strings.Join(s.pending, ",") + "/" + strings.Join(s.revokes, ",") +
		"/" + strings.Join(s.doomed, ",") + "/" + strings.Join(s.keys, ",") + "/" + strings.Join(s.revoked, ",")
	return &s
}

// withOne returns a sorted copy of list with v added once.
func withOne(list []string, v string) []string {
	if slices.Contains(list, v) {
		return list
	}
	out := append(slices.Clone(list), v)
	slices.Sort(out)
	return out
}

// withoutOne returns a copy of list without v.
func withoutOne(list []string, v string) []string {
	return slices.DeleteFunc(slices.Clone(list), func(x string) bool { return x == v })
}

// storedFor is the license stored under key, "" when none is.
func (s *robustState) storedFor(key string) string {
	for _, kv := range s.keys {
		if k, v, _ := strings.Cut(kv, "="); k == key {
			return v
		}
	}
	return ""
}

// known reports whether id names a license of the state.
func (s *robustState) known(id string) bool {
	return s.lic == id || slices.Contains(s.revoked, id) || slices.ContainsFunc(s.keys, func(kv string) bool { return strings.HasSuffix(kv, "="+id) })
}

// bind returns the state where the license placeholder is id: an answer
// named the license the reconciler made. ok is false when from is neither
// id nor a placeholder, or id names another license already.
func (s robustState) bind(from, id string) (robustState, bool) {
	switch {
	case from == id:
		return s, true
	case !strings.HasPrefix(from, "?") || id == "" || s.known(id):
		return s, false
	}
	swap := func(list []string) []string {
		out := make([]string, len(list))
		for i, v := range list {
			if strings.HasSuffix(v, "="+from) {
				v = strings.TrimSuffix(v, from) + id
			} else if v == from {
				v = id
			}
			out[i] = v
		}
		slices.Sort(out)
		return out
	}
	if s.lic == from {
		s.lic = id
	}
	s.keys, s.revoked = swap(s.keys), swap(s.revoked)
	return s, true
}

// revoke is the state after the holder's license was revoked: the domain
// is free and the consumer's open creates for it are superseded (they can
// never bring it back); a vendor's deletion supersedes nothing.
func (s robustState) revoke(byConsumer bool) robustState {
	if byConsumer {
		s.pending = slices.DeleteFunc(slices.Clone(s.pending), func(p string) bool { return strings.HasPrefix(p, s.holder+"|") })
	}
	s.revoked = withOne(s.revoked, s.lic)
	s.revokes = withoutOne(s.revokes, s.lic)
	s.holder, s.lic = "", ""
	return s
}

// create is the state after consumer's intent tag made a license for the
// free domain, id (a placeholder when not known), stored under key.
func (s robustState) create(consumer, tag, key, id string) robustState {
	s.holder, s.lic = consumer, id
	s.pending = withoutOne(s.pending, consumer+"|"+tag)
	if key != "" {
		s.keys = withOne(s.keys, key+"="+id)
	}
	return s
}

// settleAll is every state the open intents can lead s to, s included.
func settleAll(s *robustState) []*robustState {
	seen := map[string]bool{s.key: true}
	out := []*robustState{s}
	for i := 0; i < len(out) && len(out) < robustMaxStates; i++ {
		c := out[i]
		var next []robustState
		for _, p := range c.pending {
			if c.holder != "" {
				break // held: no create can take effect (it will be abandoned, or superseded)
			}
			consumer, tag, _ := strings.Cut(p, "|")
			key := ""
			if !strings.HasPrefix(tag, "#") {
				key = tag
			}
			next = append(next, c.create(consumer, tag, key, "?"+tag))
		}
		// A revoke or a deletion at the vendor takes effect, or comes to
		// nothing (the license it names is not the one held).
		for _, id := range c.revokes {
			n := *c
			n.revokes = withoutOne(n.revokes, id)
			if b, ok := n.bind(n.lic, id); ok && n.holder != "" {
				n = b.revoke(true)
			}
			next = append(next, n)
		}
		for _, id := range c.doomed {
			n := *c
			n.doomed = withoutOne(n.doomed, id)
			if b, ok := n.bind(n.lic, id); ok && n.holder != "" {
				n = b.revoke(false)
			}
			next = append(next, n)
		}
		for _, n := range next {
			if sealed := n.seal(); !seen[sealed.key] {
				seen[sealed.key] = true
				out = append(out, sealed)
			}
		}
	}
	return out
}

// robustStep is every state the operation can leave s in when it was
// answered out; none when the answer is impossible from s.
func robustStep(s *robustState, in robustInput, out robustOutput) []robustState {
	switch in.Kind {
	case robustCreate:
		return stepCreate(*s, in, out)
	case robustRevoke:
		return stepRevoke(*s, in, out)
	case robustShow:
		return stepShow(*s, in, out)
	case robustList:
		return stepList(*s, in, out)
	case robustVendorDelete:
		s := *s
		s.doomed = withOne(s.doomed, in.ID)
		return []robustState{s}
	}
	return nil
}

// unknownAnswer reports whether a write's answer leaves its effect unknown.
func unknownAnswer(out robustOutput) bool {
	switch {
	case out.Status == 0, out.Status == 202, out.Status >= 500 && out.Code != "vendor_unavailable":
		return true
	}
	return false
}

func stepCreate(s robustState, in robustInput, out robustOutput) []robustState {
	tag := in.Key
	if tag == "" {
		tag = fmt.Sprintf("#%d", in.Op)
	}
	stored := ""
	if in.Key != "" {
		stored = s.storedFor(in.Key)
	}
	switch {
	case out.Replayed && out.Status != 201:
		return nil // only an effect is stored
	case out.Status == 201 && stored != "":
		n, ok := s.bind(stored, out.ID)
		return keep(n, ok)
	case out.Status == 201:
		if out.Replayed || s.holder != "" || out.ID == "" || s.known(out.ID) {
			return nil
		}
		return []robustState{s.create(in.Consumer, tag, in.Key, out.ID)}
	case out.Status == 200:
		if s.holder != in.Consumer || stored != "" {
			return nil
		}
		n, ok := s.bind(s.lic, out.ID)
		return keep(n, ok && out.LStatus != "revoked")
	case out.Status == 202:
		if stored != "" {
			return nil
		}
		s.pending = withOne(s.pending, in.Consumer+"|"+tag)
		return []robustState{s}
	case out.Status == 409 && out.Code == "domain_taken":
		return keep(s, s.holder != "" && s.holder != in.Consumer)
	case out.Status == 409 && (out.Code == "request_in_progress" || out.Code == "intent_superseded"),
		out.Status == 422 && (out.Code == "idempotency_key_reused" || out.Code == "vendor_rejected"),
		out.Status == 503 && out.Code == "vendor_unavailable":
		return []robustState{s}
	case unknownAnswer(out):
		states := []robustState{s}
		if stored == "" {
			p := s
			p.pending = withOne(p.pending, in.Consumer+"|"+tag)
			states = append(states, p)
			if s.holder == "" {
				states = append(states, s.create(in.Consumer, tag, in.Key, "?"+tag))
			}
		}
		return states
	}
	return nil
}

func stepRevoke(s robustState, in robustInput, out robustOutput) []robustState {
	mine := s.holder == in.Consumer
	switch {
	case out.Replayed && out.Status != 204:
		return nil
	case out.Status == 204:
		if slices.Contains(s.revoked, in.ID) {
			return []robustState{s}
		}
		if !mine {
			return nil
		}
		n, ok := s.bind(s.lic, in.ID)
		return keep(n.revoke(true), ok)
	case out.Status == 409 && out.Code == "request_in_progress",
		out.Status == 503 && out.Code == "vendor_unavailable",
		out.Status == 422 && out.Code == "vendor_rejected":
		return []robustState{s}
	case unknownAnswer(out):
		states := []robustState{s}
		if n, ok := s.bind(s.lic, in.ID); mine && ok {
			states = append(states, n.revoke(true))
			n.revokes = withOne(n.revokes, in.ID)
			states = append(states, n)
		}
		return states
	}
	return nil
}

func stepShow(s robustState, in robustInput, out robustOutput) []robustState {
	switch {
	case out.Status != 200:
		return nil
	case out.LStatus == "revoked":
		var states []robustState
		for _, r := range s.revoked {
			if n, ok := s.bind(r, in.ID); ok {
				states = append(states, n)
			}
		}
		return states
	case s.holder != in.Consumer:
		return nil
	}
	n, ok := s.bind(s.lic, in.ID)
	return keep(n, ok)
}

func stepList(s robustState, in robustInput, out robustOutput) []robustState {
	switch {
	case out.Status != 200 || out.Code != "":
		return nil
	case out.ID == "":
		return keep(s, s.holder != in.Consumer)
	case s.holder != in.Consumer || out.LStatus == "revoked":
		return nil
	}
	n, ok := s.bind(s.lic, out.ID)
	return keep(n, ok)
}

// keep is s when ok, else no state.
func keep(s robustState, ok bool) []robustState {
	if !ok {
		return nil
	}
	return []robustState{s}
}

// robustModel is the specification as porcupine takes it.
var robustModel = (&porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byDomain := map[string][]porcupine.Operation{}
		var domains []string
		for _, op := range history {
			d := op.Input.(robustInput).Domain
			if _, ok := byDomain[d]; !ok {
				domains = append(domains, d)
			}
			byDomain[d] = append(byDomain[d], op)
		}
		slices.Sort(domains)
		var out [][]porcupine.Operation
		for _, d := range domains {
			out = append(out, byDomain[d])
		}
		return out
	},
	Init: func() []interface{} { return []interface{}{robustState{}.seal()} },
	Step: func(state, input, output interface{}) []interface{} {
		var out []interface{}
		seen := map[string]bool{}
		for _, s := range settleAll(state.(*robustState)) {
			for _, n := range robustStep(s, input.(robustInput), output.(robustOutput)) {
				if sealed := n.seal(); !seen[sealed.key] && len(out) < robustMaxStates {
					seen[sealed.key] = true
					out = append(out, sealed)
				}
			}
		}
		return out
	},
	Equal: func(a, b interface{}) bool { return a.(*robustState).key == b.(*robustState).key },
	Hash: func(s interface{}) uint64 {
		h := fnv.New64a()
		_, _ = h.Write([]byte(s.(*robustState).key))
		return h.Sum64()
	},
	DescribeOperation: func(input, output interface{}) string {
		in, out := input.(robustInput), output.(robustOutput)
		var what string
		switch in.Kind {
		case robustCreate:
			what = fmt.Sprintf("%s create key=%q name=%q", in.Consumer, in.Key, in.Name)
		case robustList:
			what = in.Consumer + " list"
		default:
			what = fmt.Sprintf("%s %s %s", in.Consumer, in.Kind, in.ID)
		}
		answer := fmt.Sprint(out.Status)
		if out.Status == 0 {
			answer = "no answer"
		}
		if out.Code != "" {
			answer += " " + out.Code
		}
		if out.ID != "" {
			answer += " " + out.ID + " " + out.LStatus
		}
		if out.Replayed {
			answer += " (replayed)"
		}
		return fmt.Sprintf("#%d serve%d %s → %s", in.Op, in.Serve, what, answer)
	},
	DescribeState: func(state interface{}) string {
		s := state.(*robustState)
		return fmt.Sprintf("holder=%q lic=%s pending=%v revokes=%v doomed=%v keys=%v revoked=%v",
			s.holder, s.lic, s.pending, s.revokes, s.doomed, s.keys, s.revoked)
	},
}).ToModel()
