package database

import (
	"context"
	"errors"
	"fmt"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"gorm.io/gorm"
)

// mysqlUnknownVariable is MySQL's 1193, "Unknown system variable": a server
// without wsrep (MySQL itself) asked for @@wsrep_on.
const mysqlUnknownVariable = 1193

// catchUpWithCluster waits, with one causal read, until a MariaDB Galera node
// has applied every write set the cluster committed before the call. Galera
// applies a commit on the other nodes a moment later, so a replica started
// right after `licensor migrate` may otherwise find the newest migration
// missing on its node. It does nothing on a server that is no Galera node.
func catchUpWithCluster(ctx context.Context, db *gorm.DB, timeout time.Duration) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Plain queries without arguments: the text protocol, nothing prepared.
	var on int
	err = sqlDB.QueryRowContext(ctx, "SELECT @@global.wsrep_on").Scan(&on)
	if me := (*mysqldriver.MySQLError)(nil); errors.As(err, &me) && me.Number == mysqlUnknownVariable {
		return nil
	}
	if err != nil {
		return classify(fmt.Errorf("check schema: is this a Galera node: %w", err))
	}
	if on == 0 {
		return nil
	}
	var one int
	if err := sqlDB.QueryRowContext(ctx, "SET STATEMENT wsrep_sync_wait = 1 FOR SELECT 1").Scan(&one); err != nil {
		return classify(fmt.Errorf("check schema: wait for this Galera node to apply what the cluster committed: %w", err))
	}
	return nil
}
