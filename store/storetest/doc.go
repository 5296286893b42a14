// Package storetest gives each test its own migrated PostgreSQL database.
//
// The server comes from TEST_DATABASE_URL (default: the local server on 127.0.0.1:5432,
// user postgres). `make test` sets the variable, starting a private cluster when no server is
// reachable. A template database holding the current migrations is built once per migration
// set (named by a hash of the embedded files, built under an advisory lock so parallel test
// processes build it once); each test then gets CREATE DATABASE … TEMPLATE, which takes a few
// milliseconds, and the database is dropped when the test ends.
//
// Clock is the settable clock those tests hand to the Now options of the store and the
// packages above it.
package storetest
