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

// catchUpWithCluster waits until a MariaDB Galera node has applied every
// write set the cluster committed before the call: one causal read
// (wsrep_sync_wait=1 for that statement alone). Galera certifies a
// transaction on every node at COMMIT but applies it on the others a moment
// later, so a replica started on another node right after `licensor
// migrate` may find the newest migration not yet applied there; after the
// causal read it sees every migration committed before it, and a schema
// that is still behind is one that really is. The wait is bounded by
// timeout (DB_QUERY_TIMEOUT) and by the node's repl.causal_read_timeout. On
// a server that is no Galera node (MySQL, MariaDB with wsrep_on off) it
// does nothing.
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
