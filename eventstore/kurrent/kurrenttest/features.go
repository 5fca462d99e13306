package kurrenttest

import (
	"context"
	"net"
	"strconv"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/gossip"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/serverfeatures"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/shared"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"github.com/google/uuid"
)

// ServerVersion is the version the server reports to clients.
const ServerVersion = "24.10.0"

// streamsService implements the Streams API over an eventLog.
type streamsService struct {
	streams.UnimplementedStreamsServer
	log *eventLog
}

// featuresService answers the client's first call after connecting: which
// methods the node supports, and its version.
type featuresService struct {
	serverfeatures.UnimplementedServerFeaturesServer
}

func (featuresService) GetSupportedMethods(context.Context, *shared.Empty) (*serverfeatures.SupportedMethods, error) {
	const svc = "event_store.client.streams.streams"
	return &serverfeatures.SupportedMethods{
		EventStoreServerVersion: ServerVersion,
		Methods: []*serverfeatures.SupportedMethod{
			{ServiceName: svc, MethodName: "append"},
			{ServiceName: svc, MethodName: "read"},
		},
	}, nil
}

// gossipService reports a cluster of one: this node, alive, the leader,
// reachable at advertise (the address clients are given, i.e. the gate's).
type gossipService struct {
	gossip.UnimplementedGossipServer
	instance  uuid.UUID
	advertise string
}

func (g gossipService) Read(context.Context, *shared.Empty) (*gossip.ClusterInfo, error) {
	host, portText, err := net.SplitHostPort(g.advertise)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, err
	}
	return &gossip.ClusterInfo{Members: []*gossip.MemberInfo{{
		InstanceId:   toProtoUUID(g.instance, true),
		TimeStamp:    time.Now().UnixNano() / 100,
		State:        gossip.MemberInfo_Leader,
		IsAlive:      true,
		HttpEndPoint: &gossip.EndPoint{Address: host, Port: uint32(port)},
	}}}, nil
}
