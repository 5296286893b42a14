package main

import "context"

type UpgradeResult struct{}

func (s *suite) upgradeScenario(ctx context.Context, res *Results) error { return nil }
