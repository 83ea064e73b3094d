"""What the check families share: the kinds of check and the comparison of a figure with its
threshold (``base``), findings and the status they give (``findings``), one PCIe link
against the profile (``pcie``), node-pair schedules and matrices (``pairs``). Nothing here
declares a check."""
