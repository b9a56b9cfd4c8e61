/* placeholder: replaced by the null tool */
