package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/groupconfig"
)

// The dead-letter flood guard's side of `strata share-group`: describe
// says when a group is paused, resume lifts the pause (deletes the group
// config strata.share.dlq.flood.paused the broker set).

// rawClient is a client for requests kadm has no helper for (group
// configs), closed by the caller.
func (a *adminFlags) rawClient() (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(strings.Split(a.bootstrap, ",")...), kgo.RetryTimeout(a.timeout)}, a.opts...)...)
}

// sharePaused reports whether group is paused by the flood guard.
func sharePaused(ctx context.Context, cl *kgo.Client, group string) (bool, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	r.ConfigNames = []string{groupconfig.FloodPaused}
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return false, err
	}
	for _, rr := range resp.Resources {
		if err := kerr.ErrorForCode(rr.ErrorCode); err != nil {
			return false, err
		}
		for _, c := range rr.Configs {
			if c.Name == groupconfig.FloodPaused && c.Value != nil && strings.EqualFold(*c.Value, "true") {
				return true, nil
			}
		}
	}
	return false, nil
}

// sharePausedNote prints a line under describe's output when group is
// paused (nothing otherwise, nor when the broker cannot tell).
func sharePausedNote(ctx context.Context, a *adminFlags, group string, w io.Writer) {
	cl, err := a.rawClient()
	if err != nil {
		return
	}
	defer cl.Close()
	if paused, err := sharePaused(ctx, cl, group); err == nil && paused {
		fmt.Fprintf(w, "\nPAUSED by the dead-letter flood guard (%s=true): nothing is delivered; resume with: strata share-group resume %s\n", groupconfig.FloodPaused, group)
	}
}

// shareResume deletes group's strata.share.dlq.flood.paused.
func shareResume(ctx context.Context, a *adminFlags, group string, w io.Writer) error {
	cl, err := a.rawClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	paused, err := sharePaused(ctx, cl, group)
	if err != nil {
		return err
	}
	if !paused {
		fmt.Fprintf(w, "share group %s is not paused\n", group)
		return nil
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op = groupconfig.FloodPaused, kmsg.IncrementalAlterConfigOpDelete
	r.Configs = append(r.Configs, c)
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, rr := range resp.Resources {
		if err := kerr.ErrorForCode(rr.ErrorCode); err != nil {
			msg := ""
			if rr.ErrorMessage != nil {
				msg = ": " + *rr.ErrorMessage
			}
			return fmt.Errorf("resuming %s: %w%s", group, err, msg)
		}
	}
	fmt.Fprintf(w, "share group %s resumed\n", group)
	return nil
}
