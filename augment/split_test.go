package augment

import (
	"strings"
	"testing"
)

// TestParseSplit: the ops after "|" are the reader's, every epoch, and
// only the cheap ones may go there (issue 30).
func TestParseSplit(t *testing.T) {
	tests := []struct {
		in, offline, online, err string
	}{
		{"resize=256,crop=256 | crop=224:random,hflip=0.5", "resize=256,crop=256", "crop=224:random,hflip=0.5", ""},
		{"resize=256,crop=224", "resize=256,crop=224", "", ""},
		{"resize=256|crop=224,vflip=0.5,rrc=224:scale=0.5-1", "resize=256", "crop=224,vflip=0.5,rrc=224:scale=0.5-1", ""},
		{" | hflip=0.5", "", "hflip=0.5", ""},
		{"resize=256 | jitter=0.4/0.4/0.4/0.1", "", "", "jitter=0.4/0.4/0.4/0.1 after \"|\""},
		{"resize=256 | resize=224", "", "", "move it before \"|\""},
		{"resize=256 | crop=224 | hflip=0.5", "", "", "more than one \"|\""},
		{"resize=256 |", "", "", "nothing after \"|\""},
		{"resize=256 | bogus=1", "", "", "online part"},
	}
	for _, tt := range tests {
		off, on, err := ParseSplit(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseSplit(%q) error %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || off.String() != tt.offline || on.String() != tt.online {
			t.Errorf("ParseSplit(%q) = %q | %q, %v; want %q | %q", tt.in, off, on, err, tt.offline, tt.online)
		}
	}
}

func TestParseFileSplit(t *testing.T) {
	tests := []struct {
		name, body, offline, online, err string
	}{
		{"r.yaml", "- resize: 256\n- crop: 256\n- '|'\n- crop: 224:random\n- hflip: 0.5\n", "resize=256,crop=256", "crop=224:random,hflip=0.5", ""},
		{"r.yaml", "offline: [resize=256, crop=256]\nonline:\n  - crop: {size: 224, random: true}\n  - vflip=0.5\n", "resize=256,crop=256", "crop=224:random,vflip=0.5", ""},
		{"r.json", `["resize=256", "|", {"hflip": 0.5}]`, "resize=256", "hflip=0.5", ""},
		{"r.json", `["resize=256"]`, "resize=256", "", ""},
		{"r.yaml", "online: [blur=1]\n", "", "", "blur=1 after \"|\""},
		{"r.yaml", "- resize=256\n- '|'\n- crop=224\n- '|'\n", "", "", "op 4: a second \"|\""},
		{"r.yaml", "offline: [resize=256]\nextra: []\n", "", "", `key "extra"`},
	}
	for _, tt := range tests {
		off, on, err := ParseFileSplit(tt.name, []byte(tt.body))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s %q: error %v, want %q", tt.name, tt.body, err, tt.err)
			}
			continue
		}
		if err != nil || off.String() != tt.offline || on.String() != tt.online {
			t.Errorf("%s %q = %q | %q, %v; want %q | %q", tt.name, tt.body, off, on, err, tt.offline, tt.online)
		}
	}
}
