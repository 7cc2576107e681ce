//go:build cuda

package gputest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/engine"
	"github.com/vouchml/vouch/cuda/kernels"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/plan"
)

// OpenNodeTarget opens CUDA device ordinal for NodeTests: the driver (the
// library at driver, "" searching), the exact kernels compiled by NVRTC
// for the device's architecture as vouch build --device compiles them
// (once: when imageCache names a file holding an image of the same
// source, options and architecture, that image is taken, and a compiled
// one is written there), and a retained primary context, so that the
// tests' engines, each opening and closing its own program, do not
// recreate the device's context every time. The returned func releases it.
// Each GPU plan's engine is exec.NewPlanEngine on cuda:ordinal, the
// serving engine's path.
func OpenNodeTarget(driver, nvrtc string, ordinal int, imageCache string, w io.Writer) (NodeTarget, func(), error) {
	drv, err := cuda.Open(driver)
	if err != nil {
		return NodeTarget{}, nil, err
	}
	info, err := drv.Device(ordinal)
	if err != nil {
		return NodeTarget{}, nil, err
	}
	hold, err := drv.Context(ordinal)
	if err != nil {
		return NodeTarget{}, nil, err
	}
	arch := info.Arch()
	src := kernels.Source()
	sum := sha256.Sum256([]byte(src))
	var img *cuda.Image
	if b, err := os.ReadFile(imageCache); imageCache != "" && err == nil {
		if c, err := cuda.DecodeImage(b); err == nil && c.Arch == arch && c.SourceDigest == hex.EncodeToString(sum[:]) && slices.Equal(c.Options, kernels.Options) {
			img = c
			fmt.Fprintf(w, "nodetests: kernel image from %s (%s, NVRTC %s)\n", imageCache, arch, c.NVRTC)
		}
	}
	if img == nil {
		n, err := cuda.OpenNVRTC(nvrtc)
		if err != nil {
			hold.Close()
			return NodeTarget{}, nil, err
		}
		t0 := time.Now()
		if img, err = engine.Kernels(n, arch); err != nil {
			hold.Close()
			return NodeTarget{}, nil, err
		}
		fmt.Fprintf(w, "nodetests: NVRTC %s compiled the kernels for %s in %.1f s\n", img.NVRTC, arch, time.Since(t0).Seconds())
		if imageCache != "" {
			if err := os.WriteFile(imageCache, img.Encode(), 0o644); err != nil {
				fmt.Fprintf(w, "nodetests: kernel image not cached: %v\n", err)
			}
		}
	}
	dev := fmt.Sprintf("cuda:%d", ordinal)
	t := NodeTarget{
		Name:  engine.DeviceName(info, drv.Release()),
		Image: img,
		Env:   engine.Env{Device: info, Release: drv.Release()},
		Open: func(p *plan.Plan) (NodeEngine, error) {
			e, err := exec.NewPlanEngine(p, builtin.Registry(), exec.Options{Device: dev})
			if err != nil {
				return nil, err
			}
			return e, nil
		},
		Sticky: StickyCUDA,
	}
	return t, func() { hold.Close() }, nil
}
