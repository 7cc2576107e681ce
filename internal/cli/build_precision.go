package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/quant"
)

// loadQuantData reads the calibration data, calibration cache and
// evaluation data named by the flags into the compile options, recording
// each one's digest.
func loadQuantData(o *BuildOptions, log *buildlog.Log) error {
	q := &o.Compile.Quant
	if o.Calib != "" {
		b, err := quant.LoadBatches(o.Calib)
		if err != nil {
			return err
		}
		q.Calib = b
		if q.CalibSHA256, err = digestPath(o.Calib); err != nil {
			return err
		}
		log.Info("precision", "calibration-data", map[string]any{"path": o.Calib, "batches": len(b), "sha256": q.CalibSHA256})
	}
	if o.CalibCache != "" {
		raw, err := os.ReadFile(o.CalibCache)
		switch {
		case err == nil:
			c, err := quant.ParseCache(bytes.NewReader(raw))
			if err != nil {
				return fmt.Errorf("%s: %w", o.CalibCache, err)
			}
			q.Cache = c
			s := sha256.Sum256(raw)
			q.CacheSHA256 = hex.EncodeToString(s[:])
			log.Info("precision", "calibration-cache", map[string]any{"file": o.CalibCache, "calibrator": c.Calibrator, "tensors": len(c.Scales), "sha256": q.CacheSHA256})
		case !os.IsNotExist(err):
			return err
		}
	}
	if o.EvalData == "" && o.EvalLabels != "" {
		return fmt.Errorf("%w: --eval-labels needs --eval-data", ErrUsage)
	}
	if o.EvalData != "" {
		d, err := quant.LoadBatches(o.EvalData)
		if err != nil {
			return err
		}
		q.EvalData = d
		da, err := digestPath(o.EvalData)
		if err != nil {
			return err
		}
		la := ""
		if o.EvalLabels != "" {
			l, err := quant.LoadBatches(o.EvalLabels)
			if err != nil {
				return err
			}
			if len(l) != 1 {
				return fmt.Errorf("%w: --eval-labels: want one labels file, got %d", ErrUsage, len(l))
			}
			q.EvalLabels = l[0]
			if la, err = digestPath(o.EvalLabels); err != nil {
				return err
			}
		}
		sum := sha256.Sum256([]byte(da + la))
		q.EvalSHA256 = hex.EncodeToString(sum[:])
	}
	return nil
}

// digestPath is the SHA-256 of a file, or of a directory's data files'
// names and digests in name order.
func digestPath(p string) (string, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		b, err := os.ReadFile(p)
		if err != nil {
			return "", err
		}
		s := sha256.Sum256(b)
		return hex.EncodeToString(s[:]), nil
	}
	ents, err := os.ReadDir(p)
	if err != nil {
		return "", err
	}
	var names []string
	for _, e := range ents {
		if ext := filepath.Ext(e.Name()); !e.IsDir() && (ext == ".pb" || ext == ".npy") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		d, err := digestPath(filepath.Join(p, n))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %s\n", d, n)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
