// Package sqlcapture keeps the captured inputs of audited requests in
// MariaDB (or MySQL), for replicas that share one audit log (package
// audit/sqllog): an input captured by one replica replays on any other.
// It keeps package capture's contract — inputs encrypted with AES-256-GCM
// under a key of the model's, content-addressed by input digest, checked
// against that digest when read, erased by destroying the key
// (crypto-shredding), expired by retention — in tables of its own beside
// the log's:
//
//	CREATE TABLE vouch_capture_key (
//	  id       VARBINARY(64) PRIMARY KEY,  -- 16 hex digits
//	  name     VARBINARY(255) NOT NULL,    -- the model (or tenant)
//	  created  BIGINT NOT NULL,            -- Unix seconds
//	  shredded BIGINT NOT NULL,            -- Unix seconds; 0 while live
//	  secret   VARBINARY(32) NULL          -- the AES-256 key; NULL once shredded
//	);
//	CREATE TABLE vouch_capture_live (      -- each name's one live key
//	  name   VARBINARY(255) PRIMARY KEY,
//	  key_id VARBINARY(64) NOT NULL
//	);
//	CREATE TABLE vouch_capture_blob (
//	  digest  BINARY(32) NOT NULL,         -- SHA-256 of the plaintext: the input digest
//	  key_id  VARBINARY(64) NOT NULL,
//	  name    VARBINARY(255) NOT NULL,
//	  expires BIGINT NOT NULL,             -- Unix seconds; 0: kept until purged by hand
//	  nonce   BINARY(12) NOT NULL,
//	  sealed  LONGBLOB NOT NULL,           -- ciphertext | 16-byte tag
//	  PRIMARY KEY (digest, key_id)
//	);
//
// A blob's additional authenticated data is "vouch-sqlcapture-v1\n", then
// u16 len | key id, u16 len | name, u64 expires and the 32-byte digest
// (big-endian), so a row moved to another digest, key, name or expiry does
// not decrypt. The plaintext is audit.EncodeTensors of the input set.
//
// Two replicas that make a name's first key at once agree through
// vouch_capture_live's primary key: one key wins, the other is deleted.
// Keys are read from the database on every Put and Get and never cached, so
// a key shredded through one replica is unusable on all of them at once.
// The keys live in the same database as the blobs, as package capture's
// key file lives beside its blobs: shredding destroys the key row, and
// copies of blobs elsewhere (backups of the blob table without the key
// table) stay unreadable. A blob is bounded by the server's
// max_allowed_packet (MariaDB's default 16 MiB).
package sqlcapture

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/audit/capture"
	"github.com/vouchml/vouch/tensor"
)

var schema = []string{
	"CREATE TABLE IF NOT EXISTS `vouch_capture_key` (`id` VARBINARY(64) NOT NULL, `name` VARBINARY(255) NOT NULL, " +
		"`created` BIGINT NOT NULL, `shredded` BIGINT NOT NULL, `secret` VARBINARY(32) NULL, " +
		"PRIMARY KEY (`id`), KEY `vouch_capture_key_name` (`name`)) ENGINE=InnoDB",
	"CREATE TABLE IF NOT EXISTS `vouch_capture_live` (`name` VARBINARY(255) NOT NULL, `key_id` VARBINARY(64) NOT NULL, " +
		"PRIMARY KEY (`name`)) ENGINE=InnoDB",
	"CREATE TABLE IF NOT EXISTS `vouch_capture_blob` (`digest` BINARY(32) NOT NULL, `key_id` VARBINARY(64) NOT NULL, " +
		"`name` VARBINARY(255) NOT NULL, `expires` BIGINT NOT NULL, `nonce` BINARY(12) NOT NULL, `sealed` LONGBLOB NOT NULL, " +
		"PRIMARY KEY (`digest`, `key_id`), KEY `vouch_capture_blob_key` (`key_id`), KEY `vouch_capture_blob_expires` (`expires`)) ENGINE=InnoDB",
}

const aadMagic = "vouch-sqlcapture-v1\n"

// maxName is the longest key name (model or tenant), in bytes.
const maxName = 255

// Options configure a Store, as capture.Options does.
type Options struct {
	// Retain is how long a blob is kept after Put; 0 means forever.
	Retain time.Duration
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

// Store is the shared capture store. It is safe for concurrent use, and
// any number of processes may share one database. It implements the
// server's Capturer and replay's Inputs.
type Store struct {
	db   *sql.DB
	opts Options
}

// Open creates the store's tables in db when they are absent. The caller
// keeps db open while the Store is used.
func Open(ctx context.Context, db *sql.DB, opts Options) (*Store, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	for _, q := range schema {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return nil, fmt.Errorf("sqlcapture: creating the tables: %w", err)
		}
	}
	return &Store{db: db, opts: opts}, nil
}

// digestOf returns the 32 bytes of "sha256:<64 lowercase hex>".
func digestOf(d string) ([]byte, error) {
	h, ok := strings.CutPrefix(d, "sha256:")
	b, err := hex.DecodeString(h)
	if !ok || err != nil || len(b) != 32 || strings.ToLower(h) != h {
		return nil, fmt.Errorf("sqlcapture: input digest %q: want sha256: and 64 lowercase hex digits", d)
	}
	return b, nil
}

func aad(keyID, name string, expires uint64, digest []byte) []byte {
	b := make([]byte, 0, len(aadMagic)+4+len(keyID)+len(name)+8+32)
	b = append(b, aadMagic...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(keyID)))
	b = append(b, keyID...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(name)))
	b = append(b, name...)
	b = binary.BigEndian.AppendUint64(b, expires)
	return append(b, digest...)
}

func newAEAD(secret []byte) (cipher.AEAD, error) {
	c, err := aes.NewCipher(secret)
	if err != nil {
		return nil, fmt.Errorf("sqlcapture: %w", err)
	}
	return cipher.NewGCM(c)
}

// liveKey returns name's live key, making one if there is none.
func (s *Store) liveKey(ctx context.Context, name string) (string, []byte, error) {
	const q = "SELECT k.`id`, k.`secret` FROM `vouch_capture_live` l JOIN `vouch_capture_key` k ON k.`id` = l.`key_id` " +
		"WHERE l.`name` = ? AND k.`shredded` = 0 AND k.`secret` IS NOT NULL"
	var id string
	var secret []byte
	err := s.db.QueryRowContext(ctx, q, []byte(name)).Scan(&id, &secret)
	if err == nil {
		return id, secret, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return "", nil, fmt.Errorf("sqlcapture: %w", err)
	}
	raw, rid := make([]byte, 32), make([]byte, 8)
	rand.Read(raw)
	rand.Read(rid)
	mine := hex.EncodeToString(rid)
	if _, err := s.db.ExecContext(ctx, "INSERT INTO `vouch_capture_key` (`id`, `name`, `created`, `shredded`, `secret`) VALUES (?, ?, ?, 0, ?)",
		[]byte(mine), []byte(name), s.opts.Now().Unix(), raw); err != nil {
		return "", nil, fmt.Errorf("sqlcapture: %w", err)
	}
	// A name shredded before has a live row naming its dead key: replace
	// it; otherwise the first replica to insert wins.
	if _, err := s.db.ExecContext(ctx, "DELETE l FROM `vouch_capture_live` l JOIN `vouch_capture_key` k ON k.`id` = l.`key_id` "+
		"WHERE l.`name` = ? AND k.`shredded` <> 0", []byte(name)); err != nil {
		return "", nil, fmt.Errorf("sqlcapture: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, "INSERT IGNORE INTO `vouch_capture_live` (`name`, `key_id`) VALUES (?, ?)", []byte(name), []byte(mine)); err != nil {
		return "", nil, fmt.Errorf("sqlcapture: %w", err)
	}
	err = s.db.QueryRowContext(ctx, q, []byte(name)).Scan(&id, &secret)
	if err != nil {
		return "", nil, fmt.Errorf("sqlcapture: the live key of %q: %w", name, err)
	}
	if id != mine { // another replica's key won
		s.db.ExecContext(ctx, "DELETE FROM `vouch_capture_key` WHERE `id` = ?", []byte(mine))
	}
	return id, secret, nil
}

// Put stores inputs, encrypted with the live key of model (made on first
// use), under inputDigest, which must be their digest (audit.InputDigest).
// Storing an input already stored under the same key does nothing.
func (s *Store) Put(model, inputDigest string, inputs map[string]*tensor.Tensor) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dg, err := digestOf(inputDigest)
	if err != nil {
		return err
	}
	if model == "" || len(model) > maxName {
		return fmt.Errorf("sqlcapture: key name of %d bytes (want 1 to %d)", len(model), maxName)
	}
	plain, err := audit.EncodeTensors(inputs)
	if err != nil {
		return fmt.Errorf("sqlcapture: %w", err)
	}
	if got := audit.DigestOf(plain); got != inputDigest {
		return fmt.Errorf("sqlcapture: inputs digest to %s, not %s", got, inputDigest)
	}
	id, secret, err := s.liveKey(ctx, model)
	if err != nil {
		return err
	}
	aead, err := newAEAD(secret)
	if err != nil {
		return err
	}
	var expires uint64
	if s.opts.Retain > 0 {
		expires = uint64(s.opts.Now().Add(s.opts.Retain).Unix())
	}
	nonce := make([]byte, 12)
	rand.Read(nonce)
	sealed := aead.Seal(nil, nonce, plain, aad(id, model, expires, dg))
	if _, err := s.db.ExecContext(ctx, "INSERT IGNORE INTO `vouch_capture_blob` (`digest`, `key_id`, `name`, `expires`, `nonce`, `sealed`) VALUES (?, ?, ?, ?, ?, ?)",
		dg, []byte(id), []byte(model), int64(expires), nonce, sealed); err != nil {
		return fmt.Errorf("sqlcapture: storing %s (%d bytes): %w", inputDigest, len(sealed), err)
	}
	return nil
}

// Get returns the inputs stored under inputDigest, decrypted, after
// checking that their canonical encoding hashes to inputDigest. It fails
// with capture.ErrNotFound when nothing was captured, capture.ErrShredded
// when the inputs were erased, capture.ErrCorrupt when a blob does not
// decrypt or match.
func (s *Store) Get(inputDigest string) (map[string]*tensor.Tensor, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dg, err := digestOf(inputDigest)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, "SELECT b.`key_id`, b.`name`, b.`expires`, b.`nonce`, b.`sealed`, k.`secret`, COALESCE(k.`shredded`, -1) "+
		"FROM `vouch_capture_blob` b LEFT JOIN `vouch_capture_key` k ON k.`id` = b.`key_id` WHERE b.`digest` = ?", dg)
	if err != nil {
		return nil, fmt.Errorf("sqlcapture: %w", err)
	}
	type blob struct {
		id, name              string
		expires               int64
		nonce, sealed, secret []byte
		shredded              int64
	}
	var blobs []blob
	for rows.Next() {
		var b blob
		if err := rows.Scan(&b.id, &b.name, &b.expires, &b.nonce, &b.sealed, &b.secret, &b.shredded); err != nil {
			rows.Close()
			return nil, fmt.Errorf("sqlcapture: %w", err)
		}
		blobs = append(blobs, b)
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return nil, fmt.Errorf("sqlcapture: %w", err)
	}
	var firstErr error
	for _, b := range blobs {
		ts, err := func() (map[string]*tensor.Tensor, error) {
			switch {
			case b.shredded < 0:
				return nil, fmt.Errorf("%w: key %s of %s is not in the key table", capture.ErrShredded, b.id, b.name)
			case b.shredded > 0 || b.secret == nil:
				return nil, fmt.Errorf("%w: key %s of %s shredded at %s", capture.ErrShredded, b.id, b.name, time.Unix(b.shredded, 0).UTC().Format(time.RFC3339))
			}
			aead, err := newAEAD(b.secret)
			if err != nil {
				return nil, err
			}
			plain, err := aead.Open(nil, b.nonce, b.sealed, aad(b.id, b.name, uint64(b.expires), dg))
			if err != nil {
				return nil, fmt.Errorf("%w: %s under key %s: %w", capture.ErrCorrupt, inputDigest, b.id, err)
			}
			if got := audit.DigestOf(plain); got != inputDigest {
				return nil, fmt.Errorf("%w: the blob of %s holds inputs with digest %s", capture.ErrCorrupt, inputDigest, got)
			}
			ts, err := audit.DecodeTensors(plain)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %w", capture.ErrCorrupt, inputDigest, err)
			}
			return ts, nil
		}()
		if err == nil {
			return ts, nil
		}
		if firstErr == nil || errors.Is(firstErr, capture.ErrShredded) {
			firstErr = err
		}
	}
	if firstErr != nil {
		return nil, firstErr
	}
	return nil, fmt.Errorf("%w for %s", capture.ErrNotFound, inputDigest)
}

// Shred destroys every key of name (crypto-shredding) on every replica at
// once and deletes the blobs they encrypted. It returns how many keys were
// destroyed; zero with capture.ErrNotFound when name has none.
func (s *Store) Shred(name string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("sqlcapture: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, "UPDATE `vouch_capture_key` SET `secret` = NULL, `shredded` = ? WHERE `name` = ? AND `shredded` = 0",
		s.opts.Now().Unix(), []byte(name))
	if err != nil {
		return 0, fmt.Errorf("sqlcapture: %w", err)
	}
	n, _ := res.RowsAffected()
	if n == 0 {
		return 0, fmt.Errorf("%w: no live key for %q", capture.ErrNotFound, name)
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM `vouch_capture_live` WHERE `name` = ?", []byte(name)); err != nil {
		return 0, fmt.Errorf("sqlcapture: %w", err)
	}
	if _, err := tx.ExecContext(ctx, "DELETE b FROM `vouch_capture_blob` b JOIN `vouch_capture_key` k ON k.`id` = b.`key_id` WHERE k.`name` = ? AND k.`shredded` <> 0",
		[]byte(name)); err != nil {
		return 0, fmt.Errorf("sqlcapture: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("sqlcapture: %w", err)
	}
	return int(n), nil
}

// Purge deletes blobs whose retention has expired, and blobs whose key was
// shredded, and returns how many it deleted.
func (s *Store) Purge() (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := s.db.ExecContext(ctx, "DELETE b FROM `vouch_capture_blob` b LEFT JOIN `vouch_capture_key` k ON k.`id` = b.`key_id` "+
		"WHERE (b.`expires` <> 0 AND b.`expires` <= ?) OR k.`shredded` <> 0", s.opts.Now().Unix())
	if err != nil {
		return 0, fmt.Errorf("sqlcapture: purge: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// Keys lists the store's keys: name, id, created, and when shredded.
func (s *Store) Keys() ([]capture.KeyInfo, error) {
	rows, err := s.db.Query("SELECT `id`, `name`, `created`, `shredded` FROM `vouch_capture_key` ORDER BY `created`, `id`")
	if err != nil {
		return nil, fmt.Errorf("sqlcapture: %w", err)
	}
	defer rows.Close()
	var out []capture.KeyInfo
	for rows.Next() {
		var k capture.KeyInfo
		var created, shredded int64
		if err := rows.Scan(&k.ID, &k.Name, &created, &shredded); err != nil {
			return nil, fmt.Errorf("sqlcapture: %w", err)
		}
		k.Created = time.Unix(created, 0).UTC()
		if shredded != 0 {
			k.Shredded = time.Unix(shredded, 0).UTC()
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlcapture: %w", err)
	}
	return out, nil
}
