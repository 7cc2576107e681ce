package sqllog

// schema creates the tables tessera's MySQL driver reads and writes
// (compatibility version 1 of its format: the version row, the published
// checkpoint, the tree state, the hash tiles and the entry bundles). The
// statements are idempotent: every replica runs them at start. The empty
// tree's state (size 0, the RFC 6962 root of no leaves: SHA-256 of the
// empty string) is inserted here rather than by tessera, whose
// read-for-update-then-insert deadlocks when replicas start at once.
var schema = []string{
	"CREATE TABLE IF NOT EXISTS `Tessera` (" +
		"`id` TINYINT UNSIGNED NOT NULL, `compatibilityVersion` BIGINT UNSIGNED NOT NULL, PRIMARY KEY (`id`))",
	"INSERT IGNORE INTO `Tessera` (`id`, `compatibilityVersion`) VALUES (0, 1)",
	"CREATE TABLE IF NOT EXISTS `Checkpoint` (" +
		"`id` TINYINT UNSIGNED NOT NULL, `note` MEDIUMBLOB NOT NULL, `published_at` BIGINT NOT NULL, PRIMARY KEY (`id`))",
	"CREATE TABLE IF NOT EXISTS `TreeState` (" +
		"`id` TINYINT UNSIGNED NOT NULL, `size` BIGINT UNSIGNED NOT NULL, `root` TINYBLOB NOT NULL, PRIMARY KEY (`id`))",
	"INSERT IGNORE INTO `TreeState` (`id`, `size`, `root`) VALUES (0, 0, X'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855')",
	"CREATE TABLE IF NOT EXISTS `Subtree` (" +
		"`level` TINYINT UNSIGNED NOT NULL, `index` BIGINT UNSIGNED NOT NULL, `nodes` MEDIUMBLOB NOT NULL, PRIMARY KEY (`level`, `index`))",
	"CREATE TABLE IF NOT EXISTS `TiledLeaves` (" +
		"`tile_index` BIGINT UNSIGNED NOT NULL, `size` INT UNSIGNED NOT NULL, `data` LONGBLOB NOT NULL, PRIMARY KEY (`tile_index`))",
}
