#!/usr/bin/perl
#
# Check the links between pg_tenure's markdown files (README.md, doc/,
# SECURITY.md, bench/README.md, ...): every relative link names a file or
# directory that exists, and every #anchor names a heading of its target
# file, by GitHub's rule (the heading's text, lower case, punctuation but
# "-" and "_" dropped, each space a "-"; "-1", "-2" ... for repeats).
# Links to http(s) and mailto addresses are not followed.
#
#   perl test/doc_links.pl [source directory]
#
# Prints every broken link and exits non-zero if there was any.
use strict;
use warnings;
use File::Basename qw(dirname);
use File::Find;
use File::Spec;

my $dir = shift // '.';
my @errors;
my %anchor_cache;

# the markdown files of the tree, without git's and the tests' leftovers
sub dl_markdown_files
{
	my @files;

	find(
		{
			no_chdir => 1,
			preprocess => sub {
				grep { !/^\./ && !/^(tmp_check|results|output_iso)/ } @_;
			},
			wanted => sub { push @files, $_ if -f $_ && /\.md$/ },
		},
		$dir);
	return sort @files;
}

# the lines of a file outside fenced code blocks, with their numbers
sub dl_prose_lines
{
	my ($path) = @_;
	my (@lines, $fence);

	open(my $fh, '<:encoding(UTF-8)', $path) or die "doc_links: cannot open $path: $!\n";
	while (my $line = <$fh>)
	{
		chomp $line;
		if ($line =~ /^\s*(```|~~~)/)
		{
			$fence = defined $fence ? undef : 1;
			next;
		}
		push @lines, [ $., $line ] unless $fence;
	}
	close $fh;
	return @lines;
}

# GitHub's anchor for a heading's text
sub dl_slug
{
	my ($text) = @_;

	$text =~ s/\[([^\]]*)\]\([^)]*\)/$1/g;    # a link's text
	$text = lc $text;
	$text =~ s/[^\p{L}\p{N}\p{M}_\- ]//g;
	$text =~ s/ /-/g;
	return $text;
}

# the anchors of a markdown file's headings
sub dl_anchors
{
	my ($path) = @_;
	my (%anchors, %seen);

	return $anchor_cache{$path} if $anchor_cache{$path};
	for my $l (dl_prose_lines($path))
	{
		next unless $l->[1] =~ /^#{1,6}\s+(.*?)\s*#*\s*$/;
		my $slug = dl_slug($1);
		my $n = $seen{$slug}++;
		$anchors{ $n ? "$slug-$n" : $slug } = 1;
	}
	return $anchor_cache{$path} = \%anchors;
}

for my $file (dl_markdown_files())
{
	for my $l (dl_prose_lines($file))
	{
		my ($num, $text) = @$l;

		$text =~ s/`[^`]*`//g;    # code spans hold no links
		while ($text =~ /\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)
		{
			my $link = $1;
			next if $link =~ m{^(https?|mailto):};
			my ($path, $anchor) = $link =~ /^([^#]*)(?:#(.*))?$/;
			my $target = $path eq '' ? $file
			  : File::Spec->catfile(dirname($file), $path);
			my $where = "$file:$num: $link";

			if (!-e $target)
			{
				push @errors, "$where: no such file";
			}
			elsif (defined $anchor && $target =~ /\.md$/
				&& !dl_anchors($target)->{$anchor})
			{
				push @errors, "$where: no heading with that anchor";
			}
		}
	}
}

print STDERR "doc_links: $_\n" for @errors;
exit(@errors ? 1 : 0);
