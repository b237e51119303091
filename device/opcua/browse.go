package opcua

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gopcua/opcua/id"
	"github.com/gopcua/opcua/ua"

	"qubiq.dev/edge/device"
	"qubiq.dev/edge/value"
)

// maxBrowsePages bounds the BrowseNext round trips of one Browse.
const maxBrowsePages = 100

// Browse returns the children of node (an address as ParseAddress takes
// it; "" is the Objects folder, i=85) through hierarchical references (OPC
// UA Part 4 §5.8.2), following continuation points. Each child has its node
// id in the nsu= form (i= in namespace 0), its browse name, its node class
// ("Object", "Variable", "Method", ...), and for variables the data type
// (the standard name in namespace 0, else the nsu= node id) and whether
// both AccessLevel and UserAccessLevel allow CurrentWrite. While
// disconnected it returns a *device.QualityError with the outage's
// quality; a node the server does not know gives Bad_NodeIdUnknown.
func (d *Driver) Browse(ctx context.Context, node string) ([]device.BrowseResult, error) {
	sess, q, why := d.current()
	if sess == nil {
		return nil, device.Errorf(q, "%s", why)
	}
	if node == "" {
		node = "i=" + fmt.Sprint(id.ObjectsFolder)
	}
	start, err := d.resolve(sess, "", node)
	if err != nil {
		return nil, err
	}
	timeout := time.Duration(d.cfg.Timeout)
	bctx, cancel := context.WithTimeout(ctx, 3*timeout)
	defer cancel()
	res, err := guarded(bctx, timeout, func(c context.Context) (*ua.BrowseResponse, error) {
		return sess.c.Browse(c, &ua.BrowseRequest{
			RequestedMaxReferencesPerNode: 1000,
			NodesToBrowse: []*ua.BrowseDescription{{
				NodeID:          start,
				BrowseDirection: ua.BrowseDirectionForward,
				ReferenceTypeID: ua.NewNumericNodeID(0, id.HierarchicalReferences),
				IncludeSubtypes: true,
				ResultMask:      uint32(ua.BrowseResultMaskAll),
			}},
		})
	})
	if err != nil {
		return nil, serviceError(sess, "browse", err)
	}
	if len(res.Results) != 1 {
		return nil, device.Errorf(value.BadCommunicationError, "browse: %d results", len(res.Results))
	}
	r := res.Results[0]
	if StatusQuality(uint32(r.StatusCode)) != value.Good {
		return nil, device.Errorf(StatusQuality(uint32(r.StatusCode)), "browse %s: %s", node, statusReason(r.StatusCode))
	}
	refs := r.References
	cp := r.ContinuationPoint
	for page := 0; len(cp) > 0 && page < maxBrowsePages; page++ {
		req := &ua.BrowseNextRequest{ContinuationPoints: [][]byte{cp}}
		next, err := guarded(bctx, timeout, func(c context.Context) (*ua.BrowseNextResponse, error) {
			return sess.c.BrowseNext(c, req)
		})
		if err != nil {
			return nil, serviceError(sess, "browse next", err)
		}
		if len(next.Results) != 1 {
			break
		}
		refs = append(refs, next.Results[0].References...)
		cp = next.Results[0].ContinuationPoint
	}

	out := make([]device.BrowseResult, 0, len(refs))
	var vars []int
	var varIDs []*ua.NodeID
	for _, ref := range refs {
		if ref == nil || ref.NodeID == nil || ref.NodeID.NodeID == nil || ref.NodeID.ServerIndex != 0 {
			continue
		}
		a, err := AddressOf(ref.NodeID.NodeID, sess.ns)
		if err != nil {
			continue
		}
		if ref.NodeID.NamespaceURI != "" {
			a.URI, a.Index = ref.NodeID.NamespaceURI, 0
			if a.URI == StandardNamespace {
				a.URI = ""
			}
		}
		br := device.BrowseResult{NodeID: a.String(), NodeClass: strings.TrimPrefix(ref.NodeClass.String(), "NodeClass")}
		if ref.BrowseName != nil {
			br.BrowseName = ref.BrowseName.Name
		}
		if ref.NodeClass == ua.NodeClassVariable {
			nid, err := a.Resolve(sess.ns)
			if err == nil {
				vars = append(vars, len(out))
				varIDs = append(varIDs, nid)
			}
		}
		out = append(out, br)
	}
	if len(varIDs) > 0 {
		if err := d.fillVariables(bctx, sess, out, vars, varIDs); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// fillVariables reads DataType, AccessLevel and UserAccessLevel of the
// variables among the browse results.
func (d *Driver) fillVariables(ctx context.Context, sess *session, out []device.BrowseResult, vars []int, ids []*ua.NodeID) error {
	attrs := []ua.AttributeID{ua.AttributeIDDataType, ua.AttributeIDAccessLevel, ua.AttributeIDUserAccessLevel}
	per := maxNodesPerCall / len(attrs)
	for start := 0; start < len(ids); start += per {
		end := min(start+per, len(ids))
		req := &ua.ReadRequest{TimestampsToReturn: ua.TimestampsToReturnNeither}
		for _, nid := range ids[start:end] {
			for _, at := range attrs {
				req.NodesToRead = append(req.NodesToRead, &ua.ReadValueID{NodeID: nid, AttributeID: at})
			}
		}
		res, err := guarded(ctx, time.Duration(d.cfg.Timeout), func(c context.Context) (*ua.ReadResponse, error) {
			return sess.c.Read(c, req)
		})
		if err != nil {
			return serviceError(sess, "browse: read variables", err)
		}
		if len(res.Results) != len(req.NodesToRead) {
			return device.Errorf(value.BadCommunicationError, "browse: %d results for %d reads", len(res.Results), len(req.NodesToRead))
		}
		for k := range ids[start:end] {
			br := &out[vars[start+k]]
			base := k * len(attrs)
			if dt, ok := variantValue(res.Results[base]).(*ua.NodeID); ok {
				br.DataType = dataTypeName(dt, sess.ns)
			}
			al, _ := variantValue(res.Results[base+1]).(uint8)
			ual, ok := variantValue(res.Results[base+2]).(uint8)
			if !ok {
				ual = al
			}
			w := uint8(ua.AccessLevelTypeCurrentWrite)
			br.Writable = al&w != 0 && ual&w != 0
		}
	}
	return nil
}

// dataTypeName names a DataType node: its standard name in namespace 0
// ("Double", "UtcTime"), else its nsu= address.
func dataTypeName(dt *ua.NodeID, ns []string) string {
	if dt.Namespace() == 0 && dt.IntID() != 0 {
		if n := standardDataTypes[dt.IntID()]; n != "" {
			return n
		}
	}
	if a, err := AddressOf(dt, ns); err == nil {
		return a.String()
	}
	return dt.String()
}

// serviceError turns a failed service call into a *device.QualityError,
// failing the session when the connection is gone.
func serviceError(sess *session, what string, err error) error {
	if isConnErr(err) {
		sess.fail(err)
		return device.Errorf(value.BadNotConnected, "%s: %v", what, err)
	}
	if code, ok := asStatus(err); ok {
		return device.Errorf(StatusQuality(uint32(code)), "%s: %s", what, statusReason(code))
	}
	q, why := device.QualityOf(err)
	return device.Errorf(q, "%s: %s", what, why)
}
