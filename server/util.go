package server

import (
	"log/slog"
	"sort"
)

func levelFor(code int) slog.Level {
	switch {
	case code >= 500:
		return slog.LevelError
	case code >= 400:
		return slog.LevelWarn
	}
	return slog.LevelInfo
}

func slogString(k, v string) slog.Attr        { return slog.String(k, v) }
func slogInt(k string, v int) slog.Attr       { return slog.Int(k, v) }
func slogFloat(k string, v float64) slog.Attr { return slog.Float64(k, v) }

func sortEntries[E any](s []E, key func(E) string) {
	sort.Slice(s, func(i, j int) bool { return key(s[i]) < key(s[j]) })
}
