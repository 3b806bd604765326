package cpu

import (
	"strings"
	"testing"
)

func TestParseCPUModel(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"x86", "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel\t\t: 85\nmodel name\t: Intel(R) Xeon(R)   CPU @ 2.00GHz\n", "Intel(R) Xeon(R) CPU @ 2.00GHz"},
		{"arm", "processor\t: 0\nBogoMIPS\t: 108.00\nModel\t\t: Raspberry Pi 4 Model B Rev 1.4\n", "Raspberry Pi 4 Model B Rev 1.4"},
		{"mips", "system type\t\t: Atheros AR9330\ncpu model\t\t: MIPS 24Kc V7.4\n", "MIPS 24Kc V7.4"},
		{"empty value skipped", "model name\t:   \nmodel name\t: second\n", "second"},
		{"none", "processor\t: 0\nflags\t: fpu vme\n", ""},
	}
	for _, c := range cases {
		if got := parseCPUModel(strings.NewReader(c.in)); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
	if CPUModel() == "" {
		t.Error("CPUModel is empty; want the model name or GOARCH")
	}
}
