package main

import "context"

type BackupResult struct{}

func (s *suite) backupScenario(ctx context.Context, res *Results) error { return nil }
