module robfig_oracle

go 1.19

require (
	github.com/robfig/cron v1.2.0
	github.com/robfig/cron/v3 v3.0.1
)
