package main

import (
	_ "github.com/gorilla/websocket"
	_ "github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/larksuite/oapi-sdk-go/v3"
	_ "github.com/larksuite/oapi-sdk-go/v3/core/httpserverext"
	_ "github.com/larksuite/oapi-sdk-go/v3/event/dispatcher"
	_ "github.com/larksuite/oapi-sdk-go/v3/ws"
	_ "github.com/pressly/goose/v3"
	_ "github.com/pressly/goose/v3/lock"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/robfig/cron/v3"
	_ "github.com/sethvargo/go-retry"
	_ "github.com/spf13/cobra"
	_ "github.com/stretchr/testify/require"
)

func main() {}
