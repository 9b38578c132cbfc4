package replay

import "fmt"

func fmtSscanf(s string, as, ac, bs, bc *int) (int, error) {
	return fmt.Sscanf(s, "@@ -%d,%d +%d,%d @@", as, ac, bs, bc)
}
