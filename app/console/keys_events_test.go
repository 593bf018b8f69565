package console

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/licensor-api/licensor/internal/dbtime"

	"github.com/licensor-api/licensor/app/crypt"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/tests/testdb"
)

// keys rotate re-seals the consumer events' data (a license event carries
// its key) and the webhook endpoints' signing secrets under APP_KEY, and
// keys status counts them: after the rotation they open under the new key
// alone.
func TestKeysRotateEventsAndEndpointSecrets(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		t.Chdir(t.TempDir())
		keyA, keyB := bytes.Repeat([]byte{0xA}, 32), bytes.Repeat([]byte{0xB}, 32)
		underA, _ := crypt.New(keyA)
		underB, _ := crypt.New(keyB)
		seal := func(s string) string { v, _ := underA.Encrypt([]byte(s)); return v }
		now := dbtime.Now()
		exec := func(sql string, args ...any) {
			t.Helper()
			if err := db.Gorm.Exec(sql, args...).Error; err != nil {
				t.Fatal(err)
			}
		}
		exec("INSERT INTO consumers (id, name, created_at, updated_at) VALUES ('c1', 'c1', ?, ?)", now, now)
		exec(`INSERT INTO consumer_events (public_id, consumer_id, type, subject_id, sequence, data, created_at)
			VALUES ('evt_1', 'c1', 'license.created', 'L1', 1, ?, ?)`, seal(`{"license":{"license_key":"LK-1"}}`), now)
		exec(`INSERT INTO webhook_endpoints (id, consumer_id, url, events, secret, enabled, created_at, updated_at)
			VALUES ('E1', 'c1', 'https://shop.example/hooks', '["license.*"]', ?, 1, ?, ?)`, seal("whsec_1"), now, now)

		env := dbEnv(db, map[string]string{"APP_ENV": "testing", "APP_KEY": config.EncodeKey(keyB), "APP_PREVIOUS_KEYS": config.EncodeKey(keyA)})
		var out bytes.Buffer
		if err := Run(context.Background(), []string{"keys", "rotate"}, env, &out, &out); err != nil {
			t.Fatalf("keys rotate: %v\n%s", err, out.String())
		}
		for _, want := range []string{
			"consumer_events.data: 1 checked, 1 re-encrypted",
			"webhook_endpoints.secret: 1 checked, 1 re-encrypted",
		} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("keys rotate lacks %q:\n%s", want, out.String())
			}
		}
		var data, secret string
		if err := db.Gorm.Raw("SELECT data FROM consumer_events WHERE public_id = 'evt_1'").Scan(&data).Error; err != nil {
			t.Fatal(err)
		}
		if err := db.Gorm.Raw("SELECT secret FROM webhook_endpoints WHERE id = 'E1'").Scan(&secret).Error; err != nil {
			t.Fatal(err)
		}
		if got, err := underB.Decrypt(data); err != nil || string(got) != `{"license":{"license_key":"LK-1"}}` {
			t.Errorf("the event's data under the new key alone = %q, %v", got, err)
		}
		if got, err := underB.Decrypt(secret); err != nil || string(got) != "whsec_1" {
			t.Errorf("the endpoint's secret under the new key alone = %q, %v", got, err)
		}
	})
}
