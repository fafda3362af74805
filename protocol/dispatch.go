package protocol

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handle runs the handler for kreq. A nil response with a nil error means
// "send nothing" (acks=0 Produce); an error closes the connection.
func (s *Server) handle(ctx context.Context, kreq kmsg.Request) (kmsg.Response, error) {
	switch req := kreq.(type) {
	case *kmsg.ProduceRequest:
		return s.handleProduce(ctx, req)
	case *kmsg.FetchRequest:
		return s.handleFetch(ctx, req)
	case *kmsg.ListOffsetsRequest:
		return s.handleListOffsets(ctx, req)
	case *kmsg.MetadataRequest:
		return s.handleMetadata(ctx, req)
	case *kmsg.ApiVersionsRequest:
		return s.handleApiVersions(req)
	case *kmsg.CreateTopicsRequest:
		return s.handleCreateTopics(ctx, req)
	case *kmsg.DeleteTopicsRequest:
		return s.handleDeleteTopics(ctx, req)
	case *kmsg.InitProducerIDRequest:
		return s.handleInitProducerID(ctx, req)
	case *kmsg.DescribeConfigsRequest:
		return s.handleDescribeConfigs(ctx, req)
	case *kmsg.CreatePartitionsRequest:
		return s.handleCreatePartitions(ctx, req)
	case *kmsg.DescribeClusterRequest:
		return s.handleDescribeCluster(ctx, req)
	case *kmsg.DeleteRecordsRequest:
		return s.handleDeleteRecords(ctx, req)
	case *kmsg.OffsetForLeaderEpochRequest:
		return s.handleOffsetForLeaderEpoch(ctx, req)
	case *kmsg.DescribeLogDirsRequest:
		return s.handleDescribeLogDirs(ctx, req)
	case *kmsg.ElectLeadersRequest:
		return s.handleElectLeaders(ctx, req)
	case *kmsg.AlterPartitionAssignmentsRequest:
		return s.handleAlterPartitionReassignments(ctx, req)
	case *kmsg.ListPartitionReassignmentsRequest:
		return s.handleListPartitionReassignments(ctx, req)
	case *kmsg.AlterConfigsRequest:
		return s.handleAlterConfigs(ctx, req)
	case *kmsg.IncrementalAlterConfigsRequest:
		return s.handleIncrementalAlterConfigs(ctx, req)
	case *kmsg.UpdateFeaturesRequest:
		return s.handleUpdateFeatures(ctx, req)
	case *kmsg.ListConfigResourcesRequest:
		return s.handleListConfigResources(ctx, req)
	case *kmsg.OffsetCommitRequest:
		return s.handleOffsetCommit(ctx, req)
	case *kmsg.OffsetFetchRequest:
		return s.handleOffsetFetch(ctx, req)
	case *kmsg.FindCoordinatorRequest:
		return s.handleFindCoordinator(ctx, req)
	case *kmsg.JoinGroupRequest:
		return s.handleJoinGroup(ctx, req)
	case *kmsg.HeartbeatRequest:
		return s.handleHeartbeat(ctx, req)
	case *kmsg.LeaveGroupRequest:
		return s.handleLeaveGroup(ctx, req)
	case *kmsg.SyncGroupRequest:
		return s.handleSyncGroup(ctx, req)
	case *kmsg.DescribeGroupsRequest:
		return s.handleDescribeGroups(ctx, req)
	case *kmsg.ListGroupsRequest:
		return s.handleListGroups(ctx, req)
	case *kmsg.DeleteGroupsRequest:
		return s.handleDeleteGroups(ctx, req)
	case *kmsg.OffsetDeleteRequest:
		return s.handleOffsetDelete(ctx, req)
	case *kmsg.ConsumerGroupHeartbeatRequest:
		return s.handleConsumerGroupHeartbeat(ctx, req)
	case *kmsg.ConsumerGroupDescribeRequest:
		return s.handleConsumerGroupDescribe(ctx, req)
	case *kmsg.ShareGroupHeartbeatRequest:
		return s.handleShareGroupHeartbeat(ctx, req)
	case *kmsg.ShareGroupDescribeRequest:
		return s.handleShareGroupDescribe(ctx, req)
	case *kmsg.AddPartitionsToTxnRequest:
		return s.txns.AddPartitionsToTxn(ctx, req)
	case *kmsg.AddOffsetsToTxnRequest:
		return s.txns.AddOffsetsToTxn(ctx, req)
	case *kmsg.EndTxnRequest:
		return s.txns.EndTxn(ctx, req)
	case *kmsg.WriteTxnMarkersRequest:
		return s.handleWriteTxnMarkers(ctx, req)
	case *kmsg.TxnOffsetCommitRequest:
		return s.handleTxnOffsetCommit(ctx, req)
	case *kmsg.DescribeProducersRequest:
		return s.handleDescribeProducers(req)
	case *kmsg.DescribeTransactionsRequest:
		return s.txns.DescribeTransactions(ctx, req)
	case *kmsg.ListTransactionsRequest:
		return s.txns.ListTransactions(ctx, req)
	case *kmsg.ShareFetchRequest:
		return s.handleShareFetch(ctx, req)
	case *kmsg.ShareAcknowledgeRequest:
		return s.handleShareAcknowledge(ctx, req)
	case *kmsg.DescribeShareGroupOffsetsRequest:
		return s.handleDescribeShareGroupOffsets(ctx, req)
	case *kmsg.AlterShareGroupOffsetsRequest:
		return s.handleAlterShareGroupOffsets(ctx, req)
	case *kmsg.DeleteShareGroupOffsetsRequest:
		return s.handleDeleteShareGroupOffsets(ctx, req)
	case *kmsg.ReadShareGroupStateSummaryRequest:
		return s.handleReadShareGroupStateSummary(ctx, req)
	case *kmsg.InitializeShareGroupStateRequest:
		return s.handleInitializeShareGroupState(ctx, req)
	case *kmsg.DeleteShareGroupStateRequest:
		return s.handleDeleteShareGroupState(ctx, req)
	default:
		// A key registered without a case here: the coverage test catches it.
		return nil, fmt.Errorf("%w: %s has no handler", ErrUnknownKey, kmsg.NameForKey(kreq.Key()))
	}
}

// isBarrier reports whether a request changes state, so it runs alone in
// request order on its connection (doc.go).
func isBarrier(kreq kmsg.Request) bool {
	switch kreq.(type) {
	case *kmsg.ProduceRequest,
		*kmsg.CreateTopicsRequest,
		*kmsg.DeleteTopicsRequest,
		*kmsg.CreatePartitionsRequest,
		*kmsg.DeleteRecordsRequest,
		*kmsg.ElectLeadersRequest,
		*kmsg.AlterConfigsRequest,
		*kmsg.IncrementalAlterConfigsRequest,
		*kmsg.UpdateFeaturesRequest,
		*kmsg.InitProducerIDRequest,
		*kmsg.AddPartitionsToTxnRequest,
		*kmsg.AddOffsetsToTxnRequest,
		*kmsg.EndTxnRequest,
		*kmsg.WriteTxnMarkersRequest,
		*kmsg.TxnOffsetCommitRequest,
		*kmsg.OffsetCommitRequest,
		*kmsg.JoinGroupRequest,
		*kmsg.SyncGroupRequest,
		*kmsg.LeaveGroupRequest,
		*kmsg.DeleteGroupsRequest,
		*kmsg.OffsetDeleteRequest,
		*kmsg.ConsumerGroupHeartbeatRequest,
		*kmsg.ShareGroupHeartbeatRequest:
		return true
	}
	return false
}
