package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"image"
	"image/draw"
	_ "image/gif" // registered for image.Decode
	"image/jpeg"
	"image/png"
	"io"
	"math/big"

	"golang.org/x/image/bmp"
	xdraw "golang.org/x/image/draw"
	_ "golang.org/x/image/webp" // registered for image.Decode
)

// pi's inline image limits (image-resize.ts defaults).
const (
	maxImageWidth   = 2000
	maxImageHeight  = 2000
	maxImageBase64  = 4.5 * 1024 * 1024 // characters of base64
	defaultJPEGQ    = 80
	minResizedSide  = 100
	maxImageFileLen = 64 << 20 // larger files are not decoded at all
	maxImagePixels  = 100_000_000
)

var jpegQualitySteps = []int{85, 70, 55, 40}

const (
	imageResizeFailed  = "[Image omitted: could not be resized below the inline image size limit.]"
	imageConvertFailed = "[Image omitted: could not be converted to a supported inline image format.]"
)

// detectImageMIME recognises the image formats pi inlines from a file's
// first bytes (pi 1.6.0's own sniffer): JPEG, non-animated PNG, GIF87a/89a,
// RIFF WEBP and a validated BMP. It returns "" for anything else.
func detectImageMIME(b []byte) string {
	switch {
	case len(b) >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF:
		return "image/jpeg"
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		if pngAnimated(b) {
			return ""
		}
		return "image/png"
	case bytes.HasPrefix(b, []byte("GIF87a")), bytes.HasPrefix(b, []byte("GIF89a")):
		return "image/gif"
	case len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP":
		return "image/webp"
	case validBMP(b):
		return "image/bmp"
	}
	return ""
}

// pngAnimated reports whether an acTL chunk (APNG) comes before the first
// IDAT within the sniffed bytes.
func pngAnimated(b []byte) bool {
	for i := 8; i+8 <= len(b); {
		n := int(binary.BigEndian.Uint32(b[i:]))
		switch string(b[i+4 : i+8]) {
		case "acTL":
			return true
		case "IDAT", "IEND":
			return false
		}
		if n < 0 || n > len(b) {
			return false
		}
		i += 12 + n
	}
	return false
}

// validBMP checks more than the "BM" magic, which plain text can start
// with: a known DIB header size, one colour plane and a known bit depth.
func validBMP(b []byte) bool {
	if len(b) < 26 || b[0] != 'B' || b[1] != 'M' {
		return false
	}
	var planes, bpp uint16
	switch hdr := binary.LittleEndian.Uint32(b[14:]); hdr {
	case 12:
		planes, bpp = binary.LittleEndian.Uint16(b[22:]), binary.LittleEndian.Uint16(b[24:])
	case 40, 52, 56, 64, 108, 124:
		if len(b) < 30 {
			return false
		}
		planes, bpp = binary.LittleEndian.Uint16(b[26:]), binary.LittleEndian.Uint16(b[28:])
	default:
		return false
	}
	if planes != 1 {
		return false
	}
	switch bpp {
	case 1, 4, 8, 16, 24, 32:
		return true
	}
	return false
}

// readImage returns pi's image result: "Read image file [<mime>]", notes,
// then the image block; or the text alone when the image cannot be inlined.
func (t *readTool) readImage(ctx context.Context, r *bufio.Reader, mime string) (Result, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxImageFileLen+1))
	if err != nil {
		return Result{}, t.readErr(ctx, err)
	}
	if err := checkAbort(ctx); err != nil {
		return Result{}, err
	}
	text := func(lines ...string) Result {
		s := fmt.Sprintf("Read image file [%s]", mime)
		for _, l := range lines {
			s += "\n" + l
		}
		return Result{Content: []Content{TextContent(s)}}
	}
	var notes []string
	if mime == "image/bmp" {
		img, err := bmp.Decode(bytes.NewReader(data))
		if err != nil || len(data) > maxImageFileLen {
			return text(imageConvertFailed), nil
		}
		var buf bytes.Buffer
		if err := png.Encode(&buf, img); err != nil {
			return text(imageConvertFailed), nil
		}
		data, mime = buf.Bytes(), "image/png"
		notes = append(notes, "[Image converted from image/bmp to image/png.]")
	}
	if len(data) > maxImageFileLen {
		return text(imageResizeFailed), nil
	}
	img, ok := fitImage(ctx, data, mime)
	if !ok {
		if err := checkAbort(ctx); err != nil {
			return Result{}, err
		}
		return text(append(notes, imageResizeFailed)...), nil
	}
	if img.resized {
		notes = append(notes, fmt.Sprintf(
			"[Image: original %dx%d, displayed at %dx%d. Multiply coordinates by %s to map to original image.]",
			img.origW, img.origH, img.w, img.h, toFixed2(float64(img.origW)/float64(img.w))))
	}
	res := text(notes...)
	res.Content = append(res.Content, Content{Type: "image", Data: img.base64, MimeType: img.mime})
	return res, nil
}

type fittedImage struct {
	base64       string
	mime         string
	origW, origH int
	w, h         int
	resized      bool
}

// fitImage is pi's resizeImage: an image within 2000x2000 whose base64 is
// under 4.5 MiB is sent as is; otherwise it is scaled to fit 2000x2000 and
// encoded as the smaller of PNG and JPEG (quality 80, then 85, 70, 55, 40),
// then shrunk by 0.75 steps until it fits or a side would drop under 100.
func fitImage(ctx context.Context, data []byte, mime string) (fittedImage, bool) {
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
		return fittedImage{}, false
	}
	out := fittedImage{mime: mime, origW: cfg.Width, origH: cfg.Height, w: cfg.Width, h: cfg.Height}
	if cfg.Width <= maxImageWidth && cfg.Height <= maxImageHeight && base64.StdEncoding.EncodedLen(len(data)) < maxImageBase64 {
		out.base64 = base64.StdEncoding.EncodeToString(data)
		return out, true
	}
	if cfg.Width*cfg.Height > maxImagePixels {
		return fittedImage{}, false
	}
	src, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return fittedImage{}, false
	}
	w, h := cfg.Width, cfg.Height
	if w > maxImageWidth {
		h, w = roundDiv(h*maxImageWidth, w), maxImageWidth
	}
	if h > maxImageHeight {
		w, h = roundDiv(w*maxImageHeight, h), maxImageHeight
	}
	try := func(w, h int, qualities []int) bool {
		if ctx.Err() != nil {
			return false
		}
		scaled := scaleImage(src, w, h)
		var pngBuf bytes.Buffer
		if png.Encode(&pngBuf, scaled) != nil {
			return false
		}
		for _, q := range qualities {
			var jpgBuf bytes.Buffer
			if jpeg.Encode(&jpgBuf, scaled, &jpeg.Options{Quality: q}) != nil {
				return false
			}
			best, bestMime := pngBuf.Bytes(), "image/png"
			if jpgBuf.Len() < pngBuf.Len() {
				best, bestMime = jpgBuf.Bytes(), "image/jpeg"
			}
			if base64.StdEncoding.EncodedLen(len(best)) < maxImageBase64 {
				out.base64 = base64.StdEncoding.EncodeToString(best)
				out.mime, out.w, out.h, out.resized = bestMime, w, h, true
				return true
			}
		}
		return false
	}
	if try(w, h, append([]int{defaultJPEGQ}, jpegQualitySteps...)) {
		return out, true
	}
	for {
		w, h = w*3/4, h*3/4
		if w < minResizedSide || h < minResizedSide {
			return fittedImage{}, false
		}
		if try(w, h, jpegQualitySteps) {
			return out, true
		}
	}
}

func roundDiv(a, b int) int { return (2*a + b) / (2 * b) }

func scaleImage(src image.Image, w, h int) image.Image {
	dst := image.NewNRGBA(image.Rect(0, 0, w, h))
	xdraw.CatmullRom.Scale(dst, dst.Bounds(), src, src.Bounds(), draw.Src, nil)
	return dst
}

// toFixed2 is JavaScript's x.toFixed(2): the nearest two-decimal value,
// ties (exact in binary) going up, unlike Go's round-half-even.
func toFixed2(x float64) string {
	r := new(big.Float).SetPrec(256).SetFloat64(x)
	r.Mul(r, big.NewFloat(100))
	r.Add(r, big.NewFloat(0.5))
	i, _ := r.Int(nil) // floor for positive values
	s := i.String()
	for len(s) < 3 {
		s = "0" + s
	}
	return s[:len(s)-2] + "." + s[len(s)-2:]
}
